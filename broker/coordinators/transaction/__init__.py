"""The transaction coordinator: ``core/`` the pure shard per ``__transaction_state`` partition,
``service/`` the shards on the coordinator runtime, the markers they write and the partitions they
verify."""
