"""What the coordinator is told about a request, its configuration, and the topics it may see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol


class RequestContext(NamedTuple):
    """The request being handled: its reply token, the API version it was sent with and who sent it.

    ``client_host`` is stored verbatim in member metadata; Kafka writes it as ``/<ip>``.
    """

    token: int
    api_version: int
    client_id: str
    client_host: str


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker settings the group coordinator obeys, named and defaulted like Kafka's."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    num_partitions: int = 50


class TopicView(Protocol):
    """The broker's topic metadata, as far as offset commits need it.

    OffsetCommit v10 names topics by id; a view that can resolve them also offers
    ``topic_name(topic_id: bytes) -> str | None``. Without it, v10 topics are UNKNOWN_TOPIC_ID.
    """

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions of ``topic``, or None when the topic does not exist."""
        ...
