"""The rebalance journal's entries, as the coordinator emits them (``journal.Journal.collect``) and
the shell writes them (``broker/groups/journal_writer.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ENCODING_VERSION = 1


@dataclass(frozen=True)
class GroupEvent:
    """One journal entry. ``kind`` is ``member`` (a membership change), ``state`` (a phase of a
    rebalance: a state transition) or ``rebalance`` (the summary once the group settles)."""

    kind: str
    group: str
    group_type: str
    generation: int
    state_before: str
    state_after: str
    timestamp: int
    cause: str
    member_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "version": ENCODING_VERSION, "kind": self.kind, "group": self.group, "group_type": self.group_type,
            "generation": self.generation, "state_before": self.state_before, "state_after": self.state_after,
            "timestamp": self.timestamp, "cause": self.cause,
        }
        if self.member_id is not None:
            doc["member_id"] = self.member_id
        doc.update(self.detail)
        return doc
