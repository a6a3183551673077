"""KIP-932 share partitions, pure: which records of a partition a share group has delivered, to
whom, how often and with what outcome (``partition.py``), and its durable state as the share
coordinator's records (``records.py``). No trio, no clock, no I/O: the shell passes ``now`` and
the batches it read, and writes the records."""
