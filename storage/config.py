"""Per-log configuration, named after Kafka's topic configs and with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

# The empty list is a policy too (Kafka 4.1 on): neither deletion nor compaction, so the log is
# kept whole (infinite retention); it is what SUBTRACT leaves of "delete".
_POLICIES = {"delete", "compact", "compact,delete", "delete,compact", ""}


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms (7 days)
    segment_jitter_ms: int = 0  # segment.jitter.ms
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10485760  # segment.index.bytes (10 MiB)
    retention_ms: int = 604800000  # retention.ms; -1 = forever
    retention_bytes: int = -1  # retention.bytes; -1 = unbounded
    delete_retention_ms: int = 86400000  # delete.retention.ms (1 day)
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    cleanup_policy: str = "delete"  # cleanup.policy

    def __post_init__(self) -> None:
        if self.cleanup_policy not in _POLICIES:
            raise ValueError(f"cleanup.policy must be delete, compact or both, not {self.cleanup_policy!r}")
        if self.segment_bytes < 14:
            raise ValueError("segment.bytes is too small")
        if self.segment_index_bytes < 12:
            raise ValueError("segment.index.bytes is too small")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes cannot be negative")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def offsets_topic(cls, segment_bytes: int = 104857600) -> LogConfig:
        """``__consumer_offsets`` as Kafka creates it: compacted, 100 MiB segments."""
        return cls(segment_bytes=segment_bytes, cleanup_policy="compact")

    def to_kafka(self) -> dict[str, str]:
        """Kafka config names and string values (DescribeConfigs speaks these)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name.replace("_", ".")] = str(value)
        return out

    @classmethod
    def from_kafka(cls, configs: dict[str, str | None], base: LogConfig | None = None) -> LogConfig:
        """Overrides given by Kafka name (CreateTopics); unknown names raise ``KeyError``."""
        base = base or cls()
        names = {f.name.replace("_", "."): f for f in fields(cls)}
        changes: dict[str, object] = {}
        for name, raw in configs.items():
            if raw is None:
                continue
            f = names[name]
            if f.type in ("int", int):
                changes[f.name] = int(raw)
            elif f.type in ("float", float):
                changes[f.name] = float(raw)
            else:
                changes[f.name] = raw.replace(" ", "")
        return replace(base, **changes)  # type: ignore[arg-type]
