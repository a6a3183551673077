"""Key and value schemas of the share coordinator's records in ``__share_group_state``
(KIP-932), as Kafka 4.4 writes them: a ShareSnapshot (type 0) holds a share partition's whole
durable state, a ShareUpdate (type 1) the batches changed since. Framing is the coordinator
records' (an int16 record type, then the key struct; an int16 version, then the value struct).

Each key table declares exactly the version that names its record type, as the
``__consumer_offsets`` tables do. Delivery states in a batch: 0 available, 2 acknowledged,
4 archived (acquired records are never written: on load they are available again).
"""

from protocol.schema import INT8, INT16, INT32, INT64, STRING, UUID, Struct, array, f, message


def _state_batch() -> Struct:
    """Each message gets its own StateBatch class (``ShareSnapshotValue.StateBatch``, ...)."""
    return array(
        "StateBatch",
        f("first_offset", INT64),
        f("last_offset", INT64),
        f("delivery_state", INT8),
        f("delivery_count", INT16),
    )

ShareSnapshotKey = message(
    "ShareSnapshotKey",
    [f("group_id", STRING), f("topic_id", UUID), f("partition", INT32)],
    valid="0",
)

ShareSnapshotValue = message(
    "ShareSnapshotValue",
    [
        f("snapshot_epoch", INT32),
        f("state_epoch", INT32),
        f("leader_epoch", INT32),
        f("start_offset", INT64),
        f("delivery_complete_count", INT32, tag=0, default=-1),
        f("create_timestamp", INT64),
        f("write_timestamp", INT64),
        f("state_batches", _state_batch()),
    ],
    valid="0",
    flexible="0+",
)

ShareUpdateKey = message(
    "ShareUpdateKey",
    [f("group_id", STRING), f("topic_id", UUID), f("partition", INT32)],
    valid="1",
)

ShareUpdateValue = message(
    "ShareUpdateValue",
    [
        f("snapshot_epoch", INT32),
        f("leader_epoch", INT32),
        f("start_offset", INT64),
        f("delivery_complete_count", INT32, tag=0, default=-1),
        f("state_batches", _state_batch()),
    ],
    valid="0",
    flexible="0+",
)
