"""The feature levels kcoord reports (KIP-584): what ApiVersions lists as supported and finalized,
and what UpdateFeatures may move. A level says which behaviour a client may count on, so each one
is the level kcoord implements, derived from the APIs it serves where a feature is an API family.

- ``metadata.version`` 33 (Kafka 4.4-IV2): kcoord keeps no KRaft metadata log whose record format
  the level would select; the level names the Kafka release whose request versions kcoord follows.
  It is the one level kcoord supports, so no update can move it.
- ``kraft.version`` 0: there is no KRaft quorum (docs/cluster.md, DescribeQuorum).
- ``transaction.version`` 0-2, finalized at the broker property ``transaction.version`` (2 by
  default, as a Kafka 4.4 cluster is formatted): level 1 writes ``__transaction_state`` values at
  their flexible version 1, level 2 tells producers to use the second transaction protocol
  (KIP-890 part 2: the epoch bumped by every EndTxn v5, partitions and offsets added to the
  transaction by Produce v12 and TxnOffsetCommit v5 themselves). Every level is served whatever
  the finalized one (as in Kafka, a request's version says which protocol its client speaks); the
  level is what a Java producer reads to choose.
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


TRANSACTION_VERSION = "transaction.version"
TRANSACTION_VERSION_MAX = 2


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_level: int
    max_level: int  # the highest level supported
    finalized: int = -1  # the level the cluster runs at; -1: ``max_level``

    @property
    def level(self) -> int:
        return self.max_level if self.finalized < 0 else self.finalized


def features(served_api_keys: Collection[int], transaction_version: int = TRANSACTION_VERSION_MAX) -> tuple[Feature, ...]:
    """Every feature of Kafka 4.4, in Kafka's order, at the levels kcoord implements
    (``transaction_version``: the finalized ``transaction.version``)."""
    def when(key: int, level: int) -> int:
        return level if key in served_api_keys else 0

    return (
        Feature("group.version", 0, when(_CONSUMER_GROUP_HEARTBEAT, 1)),
        Feature("kraft.version", 0, 0),
        Feature(METADATA_VERSION, METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
        Feature("share.version", 0, when(_SHARE_GROUP_HEARTBEAT, 2)),
        Feature("streams.version", 0, when(_STREAMS_GROUP_HEARTBEAT, 1)),
        Feature(TRANSACTION_VERSION, 0, TRANSACTION_VERSION_MAX, transaction_version),
        Feature("eligible.leader.replicas.version", 0, 1),
    )


def supported_keys(served_api_keys: Collection[int], version: int,
                   transaction_version: int = TRANSACTION_VERSION_MAX) -> list[tuple[str, int, int]]:
    """(name, min, max) of the supported features ApiVersions lists at ``version``: below v4 without
    those whose minimum is 0, which older clients cannot read (Kafka's KAFKA-17492)."""
    return [(f.name, f.min_level, f.max_level) for f in features(served_api_keys, transaction_version)
            if version >= 4 or f.min_level > 0]


def finalized_levels(served_api_keys: Collection[int],
                     transaction_version: int = TRANSACTION_VERSION_MAX) -> dict[str, int]:
    """The finalized level of every feature whose level is not 0 (Kafka lists no level 0)."""
    return {f.name: f.level for f in features(served_api_keys, transaction_version) if f.level > 0}
