"""The share coordinator (KIP-932), pure: per ``__share_group_state`` partition, the durable state
of every share partition (group, topic id, partition) whose key hashes to it (state epoch, leader
epoch, start offset, state batches) and the operations on it (``shard.py``). No trio, no clock, no
I/O: an operation is ``op(shard, token, request, now)`` and returns replies, records and timers;
replaying the records rebuilds the shard."""
