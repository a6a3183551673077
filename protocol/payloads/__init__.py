"""What other messages and logs carry, over the message tables: the consumer protocol inside
JoinGroup and SyncGroup, and the records of the internal topics (``__consumer_offsets``,
``__transaction_state``, ``__share_group_state``)."""
