"""What the coordinator is told about a request, its configuration, and the topics it may see."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol


class RequestContext(NamedTuple):
    """The request being handled: its reply token, the API version it was sent with and who sent it.

    ``client_host`` is stored verbatim in member metadata; Kafka writes it as ``/<ip>``.
    ``may_describe_topic`` says whether the sender may Describe a topic (the broker's authorizer,
    read when the request arrives); None when the authorizer is off and every topic may be seen.
    It is an input like the others: what the coordinator decides with it is written in records,
    so replay never calls it.
    """

    token: int
    api_version: int
    client_id: str
    client_host: str
    may_describe_topic: Callable[[str], bool] | None = None


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
    # KIP-848 consumer groups (Kafka's group.consumer.* settings).
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # Kafka 4.3+'s group.consumer.assignment.interval.ms (KIP-1263): the least time between two
    # target assignments of a consumer group; a group config (consumer.assignment.interval.ms)
    # overrides it.
    consumer_assignment_interval_ms: int = 1000
    # Kafka's group.consumer.regex.refresh.interval.ms (an internal setting there, 10 minutes): a
    # group's regular expressions are resolved again at least this often while members heartbeat,
    # even when no topic was created.
    consumer_regex_refresh_interval_ms: int = 600000
    # group.consumer.migration.policy: "bidirectional", "upgrade", "downgrade" or "disabled".
    consumer_migration_policy: str = "bidirectional"
    # KIP-1071 streams groups (Kafka's group.streams.* settings).
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_num_standby_replicas: int = 0
    # group.streams.rack.aware.assignment.tags: client tag keys standby copies are spread over
    # (comma-separated; a group's streams.rack.aware.assignment.tags overrides it).
    streams_rack_aware_assignment_tags: str = ""
    streams_initial_rebalance_delay_ms: int = 3000
    # Kafka 4.4's streams.assignment.interval.ms (a group config, KIP-1263): the least time between
    # two target assignments of a group; changes in between wait for the next one.
    streams_assignment_interval_ms: int = 1000
    streams_max_size: int = 2**31 - 1
    # Kafka's group.streams.task.offset.interval.ms and group.streams.acceptable.recovery.lag
    # (internal settings there): what members are told, unless the group sets its own.
    streams_task_offset_interval_ms: int = 60000
    streams_acceptable_recovery_lag: int = 10000
    # group.streams.topology.description.plugin.class set: members are asked for their topology
    # descriptions (KIP-1331) and the shard keeps them in memory, as Kafka's in-memory plugin does.
    streams_topology_descriptions: bool = False
    # KIP-932 share groups (Kafka's group.share.* settings).
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    # group.share.assignment.interval.ms (KIP-1263), as consumer_assignment_interval_ms.
    share_assignment_interval_ms: int = 1000
    share_max_size: int = 200

    @property
    def upgrade_enabled(self) -> bool:
        """A classic group may become a consumer group when a consumer-protocol member joins."""
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group may go back to classic when its last consumer-protocol member leaves."""
        return self.consumer_migration_policy in ("bidirectional", "downgrade")
    # The rebalance journal (group.events.enable).
    group_events_enable: bool = True
    # Groups' own KIP-848 timings (Kafka's group configs consumer.session.timeout.ms and
    # consumer.heartbeat.interval.ms, set by IncrementalAlterConfigs), given by the broker as
    # data: group id -> (session timeout, heartbeat interval), None where the group has none.
    group_timings: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict, compare=False)

    def session_timeout_for(self, group_id: str) -> int:
        own = self.group_timings.get(group_id, (None, None))[0]
        return self.consumer_session_timeout_ms if own is None else own

    def heartbeat_interval_for(self, group_id: str) -> int:
        own = self.group_timings.get(group_id, (None, None))[1]
        return self.consumer_heartbeat_interval_ms if own is None else own

    def consumer_assignment_interval_for(self, group_id: str) -> int:
        return self._group_int(group_id, "consumer.assignment.interval.ms", self.consumer_assignment_interval_ms)

    # Groups' own configs (Kafka's group configs, set by IncrementalAlterConfigs), given by the
    # broker as data: group id -> config name -> value as set, checked when it was set.
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)

    def _group_int(self, group_id: str, name: str, broker_value: int) -> int:
        own = self.group_configs.get(group_id, {}).get(name)
        return broker_value if own is None else int(own)


    def streams_session_timeout_for(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.session.timeout.ms", self.streams_session_timeout_ms)

    def streams_heartbeat_interval_for(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.heartbeat.interval.ms", self.streams_heartbeat_interval_ms)

    def streams_initial_rebalance_delay_for(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.initial.rebalance.delay.ms",
                                 self.streams_initial_rebalance_delay_ms)

    def streams_assignment_interval_for(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.assignment.interval.ms", self.streams_assignment_interval_ms)

    def streams_task_offset_interval_for(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.task.offset.interval.ms", self.streams_task_offset_interval_ms)

    def streams_acceptable_recovery_lag_for(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.acceptable.recovery.lag", self.streams_acceptable_recovery_lag)

    def streams_assignment_configs_for(self, group_id: str) -> dict[str, str]:
        """What the task assignor is given, as Kafka keeps it in the group's metadata record
        (LastAssignmentConfigs): a change of these triggers a new target assignment."""
        standby = self._group_int(group_id, "streams.num.standby.replicas", self.streams_num_standby_replicas)
        configs = {"num.standby.replicas": str(standby)}
        own = self.group_configs.get(group_id, {}).get("streams.rack.aware.assignment.tags")
        tags = [t.strip() for t in (self.streams_rack_aware_assignment_tags if own is None else own).split(",")]
        if any(tags):
            configs["rack.aware.assignment.tags"] = ",".join(t for t in tags if t)
        return configs

    # Share groups' own timings (share.session.timeout.ms, share.heartbeat.interval.ms), likewise.
    share_group_timings: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict, compare=False)

    def share_session_timeout_for(self, group_id: str) -> int:
        own = self.share_group_timings.get(group_id, (None, None))[0]
        return self.share_session_timeout_ms if own is None else own

    def share_heartbeat_interval_for(self, group_id: str) -> int:
        own = self.share_group_timings.get(group_id, (None, None))[1]
        return self.share_heartbeat_interval_ms if own is None else own

    def share_assignment_interval_for(self, group_id: str) -> int:
        return self._group_int(group_id, "share.assignment.interval.ms", self.share_assignment_interval_ms)


class TopicView(Protocol):
    """The broker's topic metadata (Kafka's metadata image, as far as the coordinator reads it)."""

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions of ``topic``, or None when the topic does not exist."""
        ...

    def topic_id(self, topic: str) -> bytes | None:
        """The topic's 16-byte id, or None when the topic does not exist."""
        ...

    def topic_name(self, topic_id: bytes) -> str | None:
        """The name of the topic with that id, or None."""
        ...

    def topic_names(self) -> list[str]:
        """Every topic a client may subscribe to (internal topics excluded)."""
        ...

    @property
    def version(self) -> int:
        """Rises with every change of topics or partition counts."""
        ...
