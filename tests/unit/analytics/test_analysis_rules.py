"""The analysis's judgement calls as plain functions: Burrow's partition rules, group state,
staleness, time buckets, end-offset files; and the report rendering."""

from __future__ import annotations

import base64
import re

import pytest

from analytics import rules
from analytics.report import PartitionCoverage, ReportData, render_html, summary_text
from analytics.rules import Commit

MIN = 60_000


def commits(*pairs: tuple[int, int], lags: list[int] | None = None) -> list[Commit]:
    return [Commit(o, t, lags[i] if lags else None) for i, (o, t) in enumerate(pairs)]


STEADY = commits((10, 0), (20, MIN), (30, 2 * MIN), (40, 3 * MIN))


def test_log_alone_tells_ok_stop_and_rewind() -> None:
    assert rules.partition_status(STEADY, None, 3 * MIN + 1000)[0] == rules.OK
    # Idle for longer than the window spans (3 minutes): the consumer stopped.
    status, why = rules.partition_status(STEADY, None, 7 * MIN)
    assert status == rules.STOP and "4m" in why
    rewound = commits((10, 0), (50, MIN), (5, 2 * MIN))
    assert rules.partition_status(rewound, None, 2 * MIN)[0] == rules.REWIND
    # A stuck offset is not STALL without lag: it may simply be caught up.
    stuck = commits((10, 0), (10, MIN), (10, 2 * MIN))
    assert rules.partition_status(stuck, None, 2 * MIN)[0] == rules.OK


def test_with_lag_burrow_tells_stall_and_warn() -> None:
    stuck = commits((10, 0), (10, MIN), (10, 2 * MIN))
    assert rules.partition_status(stuck, 500, 2 * MIN)[0] == rules.STALL
    slow = commits((10, 0), (20, MIN), (30, 2 * MIN), lags=[100, 150, 200])
    assert rules.partition_status(slow, 210, 2 * MIN)[0] == rules.WARN
    catching_up = commits((10, 0), (20, MIN), (30, 2 * MIN), lags=[100, 90, 80])
    assert rules.partition_status(catching_up, 80, 2 * MIN)[0] == rules.OK
    # Lag at zero anywhere in the window, or now, makes the partition OK whatever else.
    touched_zero = commits((10, 0), (5, MIN), lags=[0, 30])
    assert rules.partition_status(touched_zero, 30, 10 * MIN)[0] == rules.OK
    assert rules.partition_status(stuck, 0, 10 * MIN)[0] == rules.OK
    # Rewind outranks stop.
    rewound = commits((50, 0), (5, MIN), lags=[10, 60])
    assert rules.partition_status(rewound, 60, 10 * MIN)[0] == rules.REWIND


def test_group_status_and_state() -> None:
    assert rules.group_status([rules.OK, rules.OK]) == "OK"
    assert rules.group_status([rules.OK, rules.WARN]) == "WARN"
    assert rules.group_status([rules.WARN, rules.STOP]) == "ERR"
    assert rules.group_status([]) == "OK"
    assert rules.group_state(True, False, 3) == "Stable"
    assert rules.group_state(True, False, 0) == "Empty"
    assert rules.group_state(False, False, 0) == "Empty"  # offsets only, never a member
    assert rules.group_state(True, True, 0) == "Dead"


def test_stale_means_empty_and_idle_past_retention() -> None:
    week = 7 * 24 * 60 * MIN
    now = 100 * week
    assert rules.is_stale("Empty", now - week - 1, None, now, week)
    assert not rules.is_stale("Empty", now - week + 1, None, now, week)
    assert not rules.is_stale("Empty", now - 2 * week, now - MIN, now, week)  # it changed state recently
    assert not rules.is_stale("Stable", now - 2 * week, None, now, week)


def test_buckets_durations_and_end_offsets() -> None:
    assert rules.pick_bucket_ms(60 * MIN) == MIN
    assert rules.pick_bucket_ms(61 * MIN) == 5 * MIN
    assert rules.pick_bucket_ms(10_000) == 1000
    assert rules.pick_bucket_ms(10**13) == 7 * 86_400_000
    assert rules.parse_duration_ms("90s") == 90_000 and rules.parse_duration_ms("2h") == 7_200_000
    assert rules.parse_duration_ms("250") == 250
    with pytest.raises(ValueError):
        rules.parse_duration_ms("soon")
    assert rules.parse_end_offsets('{"orders": {"0": 120, "1": 99}}') == [
        rules.EndOffset("orders", 0, 120), rules.EndOffset("orders", 1, 99)]
    assert rules.parse_end_offsets('[{"topic": "t", "partition": 2, "end_offset": 7, "timestamp": 5}]') == [
        rules.EndOffset("t", 2, 7, 5)]
    assert rules.parse_end_offsets("topic,partition,end_offset,timestamp\nt,0,10,1000\nt,0,20\n") == [
        rules.EndOffset("t", 0, 10, 1000), rules.EndOffset("t", 0, 20, None)]


def test_report_renders_its_charts_and_states_the_covered_window() -> None:
    pytest.importorskip("matplotlib", reason="charts need the analysis extra")
    t0 = 1_700_000_000_000
    data = ReportData(
        source="/data", now_ms=t0 + 10 * MIN, bucket_ms=MIN, retention_ms=7 * 24 * 60 * MIN,
        coverage=[PartitionCoverage(0, 100, 199, 60, t0, t0 + 5 * MIN)],
        problems=[("/data/__consumer_offsets-0/00000000000000000100.log", "truncated: 10 bytes")],
        inventory=[{"group": "g1", "state": "Stable", "stale": False, "topics": ["t"]},
                   {"group": "old", "state": "Empty", "stale": True, "topics": []}],
        commit_rate=[(t0 + i * MIN, "g1", 10 + i) for i in range(5)],
        events=[{"group": "g1", "generation": g, "event": "rebalance", "at_ms": t0 + g * MIN, "member_count": g}
                for g in (1, 2, 3)] + [{"group": "old", "generation": None, "event": "deleted",
                                        "at_ms": t0, "member_count": 0}],
        status_counts={"OK": 3, "STOP": 1}, tables={"latest_offsets": 4})
    summary = summary_text(data)
    assert "The log covers 2023-11-14 22:13:20 UTC to 2023-11-14 22:18:20 UTC" in summary
    assert "Compaction has erased history" in summary and "40 of the 100 offsets" in summary
    assert "1 stale group(s)" in summary and "old" in summary
    assert "truncated: 10 bytes" in summary
    page = render_html(data, summary)
    images = dict(re.findall(r"<img id='([\w-]+)'[^>]*src='data:image/png;base64,([^']+)'", page))
    assert set(images) == {"commit-rate", "rebalances", "members", "stalls"}
    for png in images.values():
        raw = base64.b64decode(png)
        assert raw.startswith(b"\x89PNG") and len(raw) > 2000


def test_local_masters_are_told_from_cluster_ones() -> None:
    from analytics.job import _local_cores

    assert [_local_cores(m) for m in ("local", "local[2]", "local[4,3]")] == [1, 2, 4]
    assert _local_cores("local[*]") is not None
    # These run executors in other processes, which need our code shipped to them.
    assert [_local_cores(m) for m in ("local-cluster[1,1,1024]", "spark://h:7077", "yarn")] == [None] * 3
