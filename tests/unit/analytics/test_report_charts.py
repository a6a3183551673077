"""The report's charts tell the truth at every time scale: distinct time labels whether the log
spans seconds or weeks, and commit counts as they happened rather than extrapolated rates."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("matplotlib")

from analytics.report import ReportData, commit_rate_figure, rebalances_figure

T0 = 1_700_000_000_000


def data(span_ms: int, bucket_ms: int, commits: list[tuple[int, int]]) -> ReportData:
    events = [{"group": "g", "generation": i, "event": "rebalance", "at_ms": T0 + i * span_ms // 3,
               "member_count": 1} for i in range(4)]
    return ReportData(source="x", now_ms=T0 + span_ms, bucket_ms=bucket_ms, retention_ms=1,
                      commit_rate=[(T0 + at, "g", n) for at, n in commits], events=events)


def tick_labels(fig: Any) -> list[str]:
    fig.canvas.draw()
    (ax,) = fig.axes
    return [t.get_text() for t in ax.get_xticklabels() if t.get_text()]


@pytest.mark.parametrize("span_ms,bucket_ms", [(20_000, 1000), (40 * 60_000, 60_000), (10 * 86_400_000, 3_600_000)])
def test_time_labels_are_distinct_at_every_scale(span_ms: int, bucket_ms: int) -> None:
    d = data(span_ms, bucket_ms, [(0, 1), (span_ms // 2, 2), (span_ms, 1)])
    for fig in (commit_rate_figure(d), rebalances_figure(d)):
        labels = tick_labels(fig)
        assert len(labels) >= 2 and len(set(labels)) == len(labels), labels


def test_a_burst_is_plotted_as_the_commits_it_was() -> None:
    d = data(20_000, 1000, [(0, 4), (10_000, 1)])
    fig = commit_rate_figure(d)
    (ax,) = fig.axes
    heights = [y for line in ax.get_lines() for y in line.get_ydata()]
    assert max(heights) == 4
    assert ax.get_ylabel() == "commits per 1.0s"
    assert "min" not in ax.get_title()
