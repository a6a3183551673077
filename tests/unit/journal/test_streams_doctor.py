"""The doctor on streams groups: a group held NotReady by its topology (a source topic missing,
topics partitioned wrongly) is a finding naming what to create or fix, as long as it lasts."""

from __future__ import annotations

from typing import Any

from doctor import diagnose

MISSING = {"status": "MISSING_SOURCE_TOPICS", "detail": "Source topics sentences are missing."}


def state(ts: int, before: str, after: str, *statuses: dict[str, str]) -> dict[str, Any]:
    event: dict[str, Any] = {"version": 1, "kind": "state", "group": "wc", "group_type": "streams",
                             "timestamp": ts, "cause": "new-member-joined", "state_before": before,
                             "state_after": after, "reason": "member m joined", "members": 2}
    if statuses:
        event["topology_status"] = list(statuses)
    return event


def test_a_group_waiting_for_its_source_topic_is_a_finding() -> None:
    [f] = diagnose([state(1000, "Dead", "NotReady", MISSING)])
    assert (f.rule, f.group, f.count, f.timestamps) == ("streams-not-ready", "wc", 1, [1000])
    assert "Source topics sentences are missing." in f.evidence and "2 members" in f.evidence
    assert "kafka-topics --create" in f.recommendation


def test_the_finding_goes_once_the_group_leaves_not_ready() -> None:
    events = [state(1000, "Dead", "NotReady", MISSING), state(5000, "NotReady", "Assigning"),
              state(5001, "Assigning", "Stable")]
    assert diagnose(events) == []
    # It came back: counted twice.
    [f] = diagnose([*events, state(9000, "Stable", "NotReady", MISSING)])
    assert f.count == 2 and f.timestamps == [1000, 9000]


def test_wrong_partition_counts_name_copartitioning() -> None:
    wrong = {"status": "INCORRECTLY_PARTITIONED_TOPICS",
             "detail": "Following topics do not have the same number of partitions: [clicks=3, views=4]"}
    [f] = diagnose([state(1000, "Empty", "NotReady", wrong)])
    assert "clicks=3, views=4" in f.evidence and "same number of partitions" in f.recommendation


def test_internal_topics_being_created_are_not_a_finding() -> None:
    internal = {"status": "MISSING_INTERNAL_TOPICS", "detail": "Internal topics are missing: [wc-counts-changelog]"}
    assert diagnose([state(1000, "Dead", "NotReady", internal)]) == []
    # Other kinds of group never have this finding.
    assert diagnose([{**state(1000, "Dead", "NotReady", MISSING), "group_type": "consumer"}]) == []
