"""The text summary and the self-contained HTML report (charts as embedded PNGs)."""

from __future__ import annotations

import datetime as dt
import html
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from analytics.journal_report import journal_sections
from analytics.render import html_table, png_of, pyplot, time_axis, utc
from analytics.rules import format_duration

MAX_GROUPS_IN_CHART = 8


@dataclass
class PartitionCoverage:
    log_partition: int
    first_offset: int
    last_offset: int
    records: int
    first_ms: int
    last_ms: int


@dataclass
class ReportData:
    source: str
    now_ms: int
    bucket_ms: int
    retention_ms: int
    coverage: list[PartitionCoverage] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, what is wrong)
    inventory: list[dict[str, Any]] = field(default_factory=list)
    commit_rate: list[tuple[int, str, int]] = field(default_factory=list)  # (bucket ms, group, commits)
    events: list[dict[str, Any]] = field(default_factory=list)  # group, generation, event, at_ms, member_count
    status_counts: dict[str, int] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)  # name -> rows
    end_offsets_given: bool = False
    rebalances: list[dict[str, Any]] = field(default_factory=list)  # rows of the rebalances table
    findings: list[dict[str, Any]] = field(default_factory=list)  # rows of the doctor table
    share_groups: list[dict[str, Any]] = field(default_factory=list)  # share_summary rows


SHARE_COLUMNS = ["group", "members", "topic", "partition", "effective_start_offset", "in_flight_records",
                 "acknowledged_records", "redelivered_total", "archived_total", "max_delivery_count", "last_write"]


def share_summary(progress: list[dict[str, Any]], members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per share partition (rows of ``share_progress``): its newest bucket, with the
    group's current members; a group with members and no share state yet gets a row of its own."""
    current: dict[str, int] = defaultdict(int)
    for m in members:
        current[m["group"]] += 1 if m["current_member"] else 0
    newest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in progress:
        k = (r["group"], r["topic_id"], r["partition"])
        if k not in newest or r["bucket_start"] > newest[k]["bucket_start"]:
            newest[k] = r
    rows = [{**{c: r.get(c) for c in SHARE_COLUMNS}, "topic": r["topic"] or r["topic_id"],
             "members": current.get(r["group"], 0)} for r in newest.values()]
    rows += [{"group": g, "members": current[g]} for g in sorted(set(current) - {r["group"] for r in rows})]
    return sorted(rows, key=lambda r: (r["group"], r.get("topic") or "", r.get("partition") or 0))


def summary_text(d: ReportData) -> str:
    lines = []
    if d.coverage:
        first = min(c.first_ms for c in d.coverage)
        last = max(c.last_ms for c in d.coverage)
        records = sum(c.records for c in d.coverage)
        span = sum(c.last_offset - c.first_offset + 1 for c in d.coverage)
        lines.append(f"The log covers {utc(first)} to {utc(last)} ({format_duration(last - first)}): "
                     f"{records:,} records in {len(d.coverage)} partition(s) of __consumer_offsets.")
        gone = span - records
        cut = sum(c.first_offset > 0 for c in d.coverage)
        if gone > 0 or cut:
            why = []
            if gone > 0:
                why.append(f"{gone:,} of the {span:,} offsets between each partition's first and last record are gone")
            if cut:
                why.append(f"{cut} partition(s) no longer start at offset 0")
            lines.append("Compaction has erased history: " + "; ".join(why) + ". Only the newest record of each "
                         "key is sure to survive, so commit rates and rebalance counts are lower bounds.")
        else:
            lines.append("No offsets are missing in that range: the history is complete.")
    else:
        lines.append("The log holds no offset-commit or group-metadata records.")
    states = Counter(g["state"] for g in d.inventory)
    lines.append(f"{len(d.inventory)} group(s): " + (", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                                                     or "none") + ".")
    stale = [g["group"] for g in d.inventory if g.get("stale")]
    if stale:
        lines.append(f"{len(stale)} stale group(s) (no members, idle longer than the offsets retention of "
                     f"{format_duration(d.retention_ms)}): {', '.join(stale[:10])}{' ...' if len(stale) > 10 else ''}.")
    if d.status_counts:
        what = ", ".join(f"{n} {s}" for s, n in sorted(d.status_counts.items()))
        lines.append(f"Partition status as of {utc(d.now_ms)}: {what}"
                     + ("" if d.end_offsets_given else " (STALL and WARN need --end-offsets)") + ".")
    rebalances = sum(1 for e in d.events if e["event"] == "rebalance")
    lines.append(f"{rebalances} rebalance(s) recorded.")
    if d.rebalances:
        stall = sum(int(r.get("stall_ms") or 0) for r in d.rebalances)
        lines.append(f"The rebalance journal holds {len(d.rebalances)} rebalance(s), {stall / 1000:.1f} s of stall "
                     f"in total; the doctor has {len(d.findings)} finding(s)"
                     + (": " + "; ".join(f"{f['group']}: {f['rule']}" for f in d.findings[:5]) if d.findings else "")
                     + ".")
    if d.share_groups:
        parts = [r for r in d.share_groups if r.get("partition") is not None]
        lines.append(f"{len({r['group'] for r in d.share_groups})} share group(s) over {len(parts)} share "
                     f"partition(s): {sum(r['in_flight_records'] or 0 for r in parts):,} record(s) in flight, "
                     f"{sum(r['redelivered_total'] or 0 for r in parts):,} redelivered and "
                     f"{sum(r['archived_total'] or 0 for r in parts):,} archived as far as the log shows, "
                     f"highest delivery count {max((r['max_delivery_count'] or 0 for r in parts), default=0)}.")
    for path, problem in d.problems:
        lines.append(f"Problem in {path}: {problem}")
    return "\n".join(lines)


def _top_groups(weights: dict[str, float]) -> list[str]:
    return [g for g, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_GROUPS_IN_CHART]]


def chart_commit_rate(d: ReportData) -> str:
    return png_of(commit_rate_figure(d))


def commit_rate_figure(d: ReportData) -> Any:
    """Commits counted per bucket, as they happened: a rate per minute would turn a burst in a
    one-second bucket into a pace the group never kept."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    totals: dict[str, float] = defaultdict(float)
    for _, g, n in d.commit_rate:
        totals[g] += n
    top = _top_groups(totals)
    series: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for bucket, g, n in d.commit_rate:
        series[g if g in top else "other groups"][bucket] += n
    for name in [*top, "other groups"]:
        if name in series:
            pts = sorted(series[name].items())
            times: list[Any] = [dt.datetime.fromtimestamp(b / 1000, dt.UTC) for b, _ in pts]
            ax.plot(times, [v for _, v in pts],
                    marker="." if len(pts) < 50 else None, label=name)
    per = format_duration(d.bucket_ms)
    ax.set_title(f"Offset commits per {per} bucket")
    time_axis(ax)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"commits per {per}")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.text(0.5, 0.5, "no commits", ha="center", transform=ax.transAxes)
    return fig


def chart_rebalances(d: ReportData) -> str:
    return png_of(rebalances_figure(d))


def rebalances_figure(d: ReportData) -> Any:
    plt = pyplot()
    counts: dict[str, float] = defaultdict(float)
    for e in d.events:
        counts[e["group"]] += 1
    groups = _top_groups(counts)
    fig, ax = plt.subplots(figsize=(10, 0.8 + 0.45 * max(1, len(groups))))
    styles = {"created": ("^", "tab:green"), "rebalance": ("o", "tab:blue"), "emptied": ("s", "tab:orange"),
              "deleted": ("x", "tab:red")}
    for kind, (marker, color) in styles.items():
        xs: list[Any] = [dt.datetime.fromtimestamp(e["at_ms"] / 1000, dt.UTC) for e in d.events
              if e["event"] == kind and e["group"] in groups]
        ys = [groups.index(e["group"]) for e in d.events if e["event"] == kind and e["group"] in groups]
        if xs:
            ax.scatter(xs, ys, marker=marker, color=color, label=kind, zorder=3)
    ax.set_yticks(range(len(groups)), groups)
    ax.set_ylim(-0.7, max(1, len(groups)) - 0.3)
    ax.set_title("Rebalances over time per group")
    time_axis(ax)
    ax.grid(alpha=0.3)
    if d.events:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.text(0.5, 0.5, "no group-metadata records", ha="center", transform=ax.transAxes)
    return fig


def chart_members(d: ReportData) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    by_group: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in d.events:
        if e["event"] != "deleted" and e["generation"] is not None:
            by_group[e["group"]].append((e["generation"], e["member_count"]))
    top = _top_groups({g: len(v) for g, v in by_group.items()})
    for g in top:
        pts = sorted(by_group[g])
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", marker="o", label=g)
    ax.set_title("Members per generation")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")
    ax.set_ylabel("members")
    ax.grid(alpha=0.3)
    if top:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        ax.text(0.5, 0.5, "no group-metadata records", ha="center", transform=ax.transAxes)
    return png_of(fig)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}pre{background:#f6f6f6;padding:1em;white-space:pre-wrap}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}
th{background:#eee}img{max-width:100%;display:block;margin:.5em 0}"""


def render_html(d: ReportData, summary: str) -> str:
    charts = [("Commit rate over time", "commit-rate", chart_commit_rate(d)),
              ("Rebalances over time per group", "rebalances", chart_rebalances(d)),
              ("Members per generation", "members", chart_members(d))]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Consumer groups: {html.escape(d.source)}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>Consumer groups in {html.escape(d.source)}</h1>",
             f"<p>Generated {utc(d.now_ms)}.</p>",
             f"<h2>Summary</h2><pre id='summary'>{html.escape(summary)}</pre>"]
    for title, ident, png in charts:
        parts.append(f"<h2>{title}</h2><img id='{ident}' alt='{title}' src='data:image/png;base64,{png}'>")
    parts += journal_sections(d.rebalances, d.findings)
    cols = ["group", "state", "status", "protocol", "generation", "members", "rebalances", "last_rebalance",
            "last_commit", "partitions_with_offsets", "topics", "total_lag", "stale", "offsets_expire_at"]
    parts.append("<h2>Groups</h2>" + html_table(d.inventory, cols))
    if d.share_groups:
        parts.append("<h2 id='share-groups'>Share groups</h2><p>Per share partition, its state after the last "
                     "share-state record: the effective start offset (everything below it is acknowledged or "
                     "archived), records in flight above it, and the records the log shows redelivered or "
                     "archived.</p>"
                     + html_table(d.share_groups, SHARE_COLUMNS))
    if d.coverage:
        parts.append("<h2>Log coverage</h2>" + html_table(
            [{"partition": c.log_partition, "first offset": c.first_offset, "last offset": c.last_offset,
              "records": c.records, "from": utc(c.first_ms), "to": utc(c.last_ms)} for c in d.coverage],
            ["partition", "first offset", "last offset", "records", "from", "to"]))
    if d.problems:
        parts.append("<h2>Problems reading the log</h2>" + html_table(
            [{"file": p, "problem": m} for p, m in d.problems], ["file", "problem"]))
    parts.append("<h2>Tables written</h2>" + html_table(
        [{"table": k, "rows": v} for k, v in d.tables.items()], ["table", "rows"]))
    parts.append("</body></html>")
    return "\n".join(parts)
