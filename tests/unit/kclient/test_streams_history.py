"""``kcoord groups --history`` of a streams group: its rebalances and membership changes as a
consumer group's, and each spell of NotReady with the statuses that held it and when it ended."""

from __future__ import annotations

from typing import Any

from kclient.group_history import render_history

MISSING = {"status": "MISSING_SOURCE_TOPICS", "detail": "Source topics orders are missing."}


def state(ts: int, before: str, after: str, **kw: Any) -> dict[str, Any]:
    return {"version": 1, "kind": "state", "group": "app", "group_type": "streams", "generation": 2,
            "timestamp": ts, "cause": "new-member-joined", "state_before": before, "state_after": after,
            "reason": "member m joined", "members": 1, **kw}


def _not_ready_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("TOPOLOGY NOT READY")
    return [line for line in lines[start + 2:] if line.strip()][1:]


def test_a_spell_of_not_ready_and_its_end() -> None:
    events = [state(1_000, "Dead", "NotReady", topology_status=[MISSING]), state(61_000, "NotReady", "Assigning"),
              state(61_001, "Assigning", "Stable"), state(90_000, "Stable", "NotReady", topology_status=[MISSING])]
    text = render_history(events, "app")
    [first, second] = _not_ready_rows(text)
    assert "MISSING_SOURCE_TOPICS: Source topics orders are missing." in first
    assert first.split()[:2] == ["1970-01-01T00:00:01.000Z", "1970-01-01T00:01:01.000Z"]
    assert second.split()[:2] == ["1970-01-01T00:01:30.000Z", "-"] and "MISSING_SOURCE_TOPICS" in second


def test_a_group_always_ready_has_no_such_section() -> None:
    text = render_history([state(1_000, "Dead", "Stable"), state(2_000, "Stable", "Reconciling")], "app")
    assert "TOPOLOGY NOT READY" not in text
