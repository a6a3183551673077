"""The feature levels kcoord reports (KIP-584): what ApiVersions lists as supported and finalized,
and what UpdateFeatures may move. A level says which behaviour a client may count on, so each one
is the level kcoord implements, derived from the APIs it serves where a feature is an API family.

- ``metadata.version`` 33 (Kafka 4.4-IV2): kcoord keeps no KRaft metadata log whose record format
  the level would select; the level names the Kafka release whose request versions kcoord follows.
  It is the one level kcoord supports, so no update can move it.
- ``kraft.version`` 0: there is no KRaft quorum (docs/cluster.md, DescribeQuorum).
- ``transaction.version`` 0: ``__transaction_state`` values are written at version 0 and EndTxn
  stops at v4, so neither KIP-890 level (1: flexible records, 2: an epoch bump per transaction)
  is implemented; a Java producer then keeps the first transaction protocol.
- ``group.version`` 1 while ConsumerGroupHeartbeat is served (KIP-848 consumer groups).
- ``eligible.leader.replicas.version`` 1: every partition has a single replica, so its eligible
  leader replicas are always empty, which is what an ELR-enabled cluster reports for it.
- ``share.version`` 2 while ShareGroupHeartbeat is served, ``streams.version`` 1 while
  StreamsGroupHeartbeat is; 0 otherwise.

The finalized levels of a cluster never change (there is no metadata log to record a change), so
the finalized epoch is constant.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

METADATA_VERSION = "metadata.version"
# Kafka 4.4-IV2, Kafka 4.4's latest production level.
METADATA_VERSION_LEVEL = 33
# Constant: nothing ever changes a finalized level.
FINALIZED_EPOCH = 1

_CONSUMER_GROUP_HEARTBEAT = 68
_SHARE_GROUP_HEARTBEAT = 76
_STREAMS_GROUP_HEARTBEAT = 88


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_level: int
    max_level: int  # supported and finalized: kcoord runs each feature at the highest level it has


def features(served_api_keys: Collection[int]) -> tuple[Feature, ...]:
    """Every feature of Kafka 4.4, in Kafka's order, at the levels kcoord implements."""
    def when(key: int, level: int) -> int:
        return level if key in served_api_keys else 0

    return (
        Feature("group.version", 0, when(_CONSUMER_GROUP_HEARTBEAT, 1)),
        Feature("kraft.version", 0, 0),
        Feature(METADATA_VERSION, METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
        Feature("share.version", 0, when(_SHARE_GROUP_HEARTBEAT, 2)),
        Feature("streams.version", 0, when(_STREAMS_GROUP_HEARTBEAT, 1)),
        Feature("transaction.version", 0, 0),
        Feature("eligible.leader.replicas.version", 0, 1),
    )


def supported_keys(served_api_keys: Collection[int], version: int) -> list[tuple[str, int, int]]:
    """(name, min, max) of the supported features ApiVersions lists at ``version``: below v4 without
    those whose minimum is 0, which older clients cannot read (Kafka's KAFKA-17492)."""
    return [(f.name, f.min_level, f.max_level) for f in features(served_api_keys)
            if version >= 4 or f.min_level > 0]


def finalized_levels(served_api_keys: Collection[int]) -> dict[str, int]:
    """The finalized level of every feature whose level is not 0 (Kafka lists no level 0)."""
    return {f.name: f.max_level for f in features(served_api_keys) if f.max_level > 0}
