"""The group coordinator (classic, consumer, share and streams groups, offsets): ``core/`` the pure
shard, ``service/`` the shards on the coordinator runtime."""
