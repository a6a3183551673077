"""KIP-1071 streams groups: the group model and its records, topology configuration, the task
assignor, reconciliation, StreamsGroupHeartbeat and StreamsGroupDescribe. Pure like the rest of
the coordinator: it imports only ``protocol`` and its siblings."""
