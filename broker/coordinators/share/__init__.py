"""The share coordinator (KIP-932): ``core/`` the pure shard per ``__share_group_state`` partition,
``service/`` the shards on the coordinator runtime."""
