"""The report's part for the rebalance journal: a per-group timeline of stalls (one band per
rebalance, from its start until the group was Stable again, coloured by cause) and the doctor's
findings."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from analytics.render import html_table, png_of, pyplot, time_axis, utc

MAX_GROUPS = 12


def _when(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def stall_timeline_figure(rebalances: list[dict[str, Any]]) -> Any:
    plt = pyplot()
    stall: dict[str, float] = defaultdict(float)
    for r in rebalances:
        stall[r["group"]] += float(r.get("stall_ms") or 0)
    groups = sorted(stall, key=lambda g: (-stall[g], g))[:MAX_GROUPS]
    fig, ax = plt.subplots(figsize=(10, 0.9 + 0.5 * max(1, len(groups))))
    causes = sorted({str(r["cause"]) for r in rebalances if r["group"] in groups})
    colors = {c: plt.get_cmap("tab10")(i % 10) for i, c in enumerate(causes)}
    from matplotlib.dates import date2num

    for r in rebalances:
        if r["group"] not in groups or r.get("started_ms") is None:
            continue
        y = groups.index(r["group"])
        start, end = _when(int(r["started_ms"])), _when(int(r["ended_ms"]))
        # At least a visible sliver: most rebalances last milliseconds on a chart of hours.
        width = max(date2num(end) - date2num(start), 0.0)
        ax.barh(y, width, left=date2num(start), height=0.6, color=colors[str(r["cause"])],
                edgecolor=colors[str(r["cause"])], linewidth=2)
    for c in causes:
        ax.barh([], [], color=colors[c], label=c)
    ax.set_yticks(range(len(groups)), groups)
    ax.set_ylim(-0.7, max(1, len(groups)) - 0.3)
    ax.set_title("Stalls per group: each band is one rebalance, start until Stable, coloured by cause")
    time_axis(ax)
    ax.grid(alpha=0.3)
    if causes:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.text(0.5, 0.5, "no rebalance journal (__kcoord_group_events)", ha="center", transform=ax.transAxes)
    return fig


def journal_sections(rebalances: list[dict[str, Any]], findings: list[dict[str, Any]]) -> list[str]:
    png = png_of(stall_timeline_figure(rebalances))
    parts = [f"<h2>Rebalance stalls</h2><img id='stalls' alt='Rebalance stalls' src='data:image/png;base64,{png}'>"]
    worst = sorted(rebalances, key=lambda r: -int(r.get("stall_ms") or 0))[:20]
    if worst:
        parts.append("<h3>Longest stalls</h3>" + html_table(
            [{**r, "started": utc(r.get("started_ms")), "stall": f"{int(r.get('stall_ms') or 0) / 1000:.3f} s"}
             for r in worst],
            ["group", "generation", "cause", "client_reason", "started", "stall", "join_phase_ms", "sync_phase_ms",
             "moved_count", "waited_for"]))
    parts.append("<h2 id='doctor'>Doctor</h2>")
    if findings:
        parts.append(html_table(findings, ["group", "rule", "count", "evidence", "recommendation", "members"]))
    else:
        parts.append("<p>No findings" + ("" if rebalances else " (no rebalance journal in the data dir)")
                     + ".</p>")
    return parts
