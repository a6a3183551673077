"""The coordinators, each in two halves by role: ``core/``, a deterministic state machine per
partition of its internal topic (no trio, no clock reads, no I/O: an operation takes the request
and ``now`` and returns responses, records and timers), and ``service/``, the core run by the one
coordinator runtime (``broker.runtime.coordinator``): its logs, replay, timers and the answers
written once durable. ``group/`` owns ``__consumer_offsets``, ``transaction/``
``__transaction_state``, ``share/`` ``__share_group_state``; each service is a
``<Kind>CoordinatorService`` over ``<Kind>CoordinatorShard`` instances."""
