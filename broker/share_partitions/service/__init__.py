"""The share partitions' shell: share sessions, the pure share partitions of
``broker/share_partitions/core`` over the topic logs, their durable state in ``__share_group_state``
and the timer that expires acquisition locks."""
