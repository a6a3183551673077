"""Which ``__consumer_offsets`` partition owns a group (Kafka's ``partitionFor``): the rule is the
protocol's (``protocol.partitioning``), named here for the coordinator and the shell."""

from __future__ import annotations

from protocol.partitioning import java_string_hash, partition_for

__all__ = ["java_string_hash", "partition_for"]
