"""Key and value schemas of the classic-group records in ``__consumer_offsets``.

A record key is an int16 version followed by the key struct; the key version doubles as the
record type (0 and 1: an offset commit, 2: a group's metadata), which is why each key table
declares exactly the versions that name its record type. Keys are never flexible. A value is
an int16 version followed by the value struct; a null value is a tombstone.
"""

from protocol.schema import BYTES, INT32, INT64, STRING, array, f, message

OffsetCommitKey = message(
    "OffsetCommitKey",
    [
        f("group", STRING),
        f("topic", STRING),
        f("partition", INT32),
    ],
    valid="0-1",
)

OffsetCommitValue = message(
    "OffsetCommitValue",
    [
        f("offset", INT64),
        f("leader_epoch", INT32, "3+", default=-1, ignorable=True),
        f("metadata", STRING, about='Not nullable: a commit with null metadata is stored as "".'),
        f("commit_timestamp", INT64),
        f("expire_timestamp", INT64, "1", default=-1, ignorable=True),
    ],
    valid="0-4",
    flexible="4+",
)

GroupMetadataKey = message(
    "GroupMetadataKey",
    [
        f("group", STRING),
    ],
    valid="2",
)

GroupMetadataValue = message(
    "GroupMetadataValue",
    [
        f("protocol_type", STRING),
        f("generation", INT32),
        f("protocol", STRING, nullable="0+"),
        f("leader", STRING, nullable="0+"),
        f("current_state_timestamp", INT64, "2+", default=-1, ignorable=True),
        f(
            "members",
            array(
                "MemberMetadata",
                f("member_id", STRING),
                f("group_instance_id", STRING, "3+", nullable="3+", default=None, ignorable=True),
                f("client_id", STRING),
                f("client_host", STRING),
                f(
                    "rebalance_timeout",
                    INT32,
                    "1+",
                    ignorable=True,
                    about="Readers of v0 records take the session timeout in its place.",
                ),
                f("session_timeout", INT32),
                f("subscription", BYTES, about="Only the metadata of the protocol the group selected."),
                f("assignment", BYTES),
            ),
        ),
    ],
    valid="0-4",
    flexible="4+",
)
