"""The console's pages as HTML, rendered on the server from what ``state`` read: each page is a
layout around one ``<main>`` fragment, and the same fragment is what the live stream sends when
it changes (the browser swaps it in), so a page and its updates cannot disagree. Every value
from the broker is escaped."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote, urlencode

from broker.console.share_figures import ShareDeliveries
from broker.console.shown_listener import Listener
from broker.console.state import ClusterState, GroupState, GroupSummary
from broker.console.timeline import Span, render_svg
from doctor import Finding
from kclient.admin_client import GroupDescription, Member, StreamsTopology


def _e(value: object) -> str:
    return escape("-" if value is None or value == "" else str(value))


def _ms(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table of cells already escaped (or built of escaped parts)."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def group_href(group_id: str) -> str:
    return "/groups/" + quote(group_id, safe="")


def layout(title: str, live: str, fragment: str, version: str = "", after: str = "") -> str:
    """A whole page: navigation, and ``fragment`` (whose version is ``version``) in the ``<main>``
    the live stream ``live`` updates, then ``after`` (which live updates leave alone)."""
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)} \u00b7 kcoord</title>"
            "<link rel=\"stylesheet\" href=\"/static/console.css\"></head><body>"
            "<header><a class=\"brand\" href=\"/\">kcoord</a><nav><a href=\"/\">Overview</a>"
            "<a href=\"/groups\">Groups</a><a href=\"/metrics\">Metrics</a></nav>"
            "<span id=\"status\" class=\"status\">static</span></header>"
            f"<main id=\"live\" data-live=\"{escape(live)}\" data-version=\"{escape(version)}\">{fragment}</main>"
            f"{after}<script src=\"/static/console.js\"></script></body></html>")


def error_page(status: int, message: str) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{status} \u00b7 kcoord</title><link rel=\"stylesheet\" href=\"/static/console.css\"></head>"
            f"<body><header><a class=\"brand\" href=\"/\">kcoord</a></header><main><h1>{status}</h1>"
            f"<p class=\"error\">{escape(message)}</p><p><a href=\"/\">Overview</a></p></main></body></html>")


def _notice(text: str) -> str:
    return f'<p class="notice">{escape(text)}</p>' if text else ""


# ---- overview --------------------------------------------------------------------------------

def overview(state: ClusterState, listeners: Sequence[Listener]) -> str:
    coordinated = Counter(g.coordinator for g in state.groups if g.coordinator is not None)
    nodes = _table(["node", "address", "groups coordinated"], (
        [_e(n.node_id), _e(f"{n.host}:{n.port}"), _e(coordinated.get(n.node_id, 0))] for n in state.nodes))
    mine = _table(["listener", "protocol", "address"], ([_e(x.name), _e(x.protocol), _e(x.address)]
                                                        for x in listeners))
    by_kind = Counter((g.group_type, g.state) for g in state.groups)
    types = sorted({t for t, _ in by_kind})
    states = sorted({s for _, s in by_kind})
    kinds = _table(["type", *states, "total"], (
        [_e(t), *(_e(by_kind.get((t, s), 0)) for s in states), _e(sum(by_kind.get((t, s), 0) for s in states))]
        for t in types))
    topics = _table(["topic", "partitions", "internal"], (
        [_e(t.name), _e(t.partitions), "yes" if t.internal else ""] for t in state.topics))
    return (f"<h1>Cluster</h1><section><h2>Nodes</h2>{nodes}<h2>This node's listeners</h2>{mine}</section>"
            f"<section><h2>Groups by type and state</h2>"
            f"{kinds if state.groups else '<p>No groups.</p>'}<p><a href=\"/groups\">All groups</a></p></section>"
            f"<section><h2>Topics</h2>{topics}</section>")


# ---- groups ----------------------------------------------------------------------------------

def _last(span: Span | None) -> str:
    if span is None:
        return "-"
    return (f'<span class="cause">{_e(span.cause)}</span> {_e(f"{span.duration_ms / 1000:.3f} s")}'
            f'<br><small>{_e(_ms(span.end_ms))}</small>')


def _matches(g: GroupSummary, query: str, group_type: str, state: str) -> bool:
    return ((not query or query.lower() in g.group_id.lower())
            and (not group_type or g.group_type.lower() == group_type.lower())
            and (not state or g.state.lower() == state.lower()))


def groups(state: ClusterState, query: str = "", group_type: str = "", group_state: str = "") -> str:
    chosen = [g for g in state.groups if _matches(g, query, group_type, group_state)]
    rows = ([f'<a href="{escape(group_href(g.group_id))}">{_e(g.group_id)}</a>', _e(g.group_type), _e(g.state),
             _e(g.members), _e(g.assignor), _e(g.lag), _seconds(g.lag_seconds), _last(g.last),
             _e(g.error) if g.error else ""]
            for g in chosen)
    types = sorted({g.group_type for g in state.groups})
    states = sorted({g.state for g in state.groups})

    def options(values: list[str], chosen: str) -> str:
        return '<option value="">any</option>' + "".join(
            f'<option{" selected" if v.lower() == chosen.lower() else ""}>{_e(v)}</option>' for v in values)

    form = (f'<form class="filters" method="get" action="/groups"><input name="q" placeholder="search group id" '
            f'value="{escape(query)}"> type <select name="type">{options(types, group_type)}</select> '
            f'state <select name="state">{options(states, group_state)}</select> <button>Filter</button></form>')
    table = _table(["group", "type", "state", "members", "assignor", "lag (records)", "lag (s)", "last rebalance",
                    ""], rows,
                   "groups")
    return (f"<h1>Groups</h1>{form}{_notice(state.journal_error)}"
            f"<p>{len(chosen)} of {len(state.groups)} groups</p>{table}")


def groups_live(query: str, group_type: str, group_state: str) -> str:
    params = {k: v for k, v in (("q", query), ("type", group_type), ("state", group_state)) if v}
    return "/live/groups" + ("?" + urlencode(params) if params else "")


# ---- a group ---------------------------------------------------------------------------------

def _partitions(tps: Sequence[tuple[str, int]]) -> str:
    return escape(", ".join(f"{t}-{p}" for t, p in sorted(tps))) or "-"


def _seconds(value: float | None) -> str:
    # Whole seconds: a lagging group's page changes once a second, not at every read.
    return "-" if value is None else f"{value:.0f}"


def _names(names: Sequence[str]) -> str:
    """Members as ``client/member-id``, a long id cut short (in full in its tooltip)."""
    if not names:
        return "-"
    return "<br>".join(f'<span class="who" title="{escape(n)}">{escape(n if len(n) <= 28 else n[:27] + chr(0x2026))}'
                       "</span>" for n in names)


def _findings(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p>No findings: the journal shows no known rebalance problem.</p>"
    return "".join(f'<div class="finding"><h3>{_e(f.rule)}</h3><p>{_e(f.evidence)}</p>'
                   f"<p><small>seen {f.count} times, {_e(_ms(min(f.timestamps)) if f.timestamps else None)} .. "
                   f"{_e(_ms(max(f.timestamps)) if f.timestamps else None)}</small></p>"
                   f'<p class="advice">{_e(f.recommendation)}</p></div>' for f in findings)


def _share_figures(deliveries: ShareDeliveries | None) -> str:
    if deliveries is None:
        return ""
    table = _table(["records", "count"], ([_e(name), _e(n)] for name, n in deliveries.figures.items()),
                   "share-figures")
    locks = ""
    if deliveries.held:
        first = deliveries.first_to_expire
        which = f"the {len(first)} that expire first" if len(first) < deliveries.held else "each"
        locks = (f"<h2>Acquisition locks</h2><p><small>{deliveries.held} records held by members of this node's "
                 f"share partitions; {which}, when its lock expires unless acknowledged, released or renewed "
                 "(whole seconds, as read).</small></p>"
                 + _table(["partition", "offset", "member", "deliveries", "lock expires in (s)"], (
                     [_e(f"{h.topic}-{h.partition}"), _e(h.offset), _names([h.member]), _e(h.delivery_count),
                      _e(max(h.expires_in_ms, 0) // 1000)] for h in first), "held-locks"))
    return ("<h2>Deliveries</h2><p><small>Counted by this node's share partitions since they were loaded; "
            "archived at the delivery limit: records no consumer could process (poison records).</small></p>"
            + table + locks)


def _tasks(tasks: Sequence[str]) -> str:
    return escape(", ".join(tasks)) or "-"


def _stale(member: Member, topology: StreamsTopology) -> bool:
    return (topology.topology_epoch is not None and member.topology_epoch is not None
            and member.topology_epoch < topology.topology_epoch)


def _members(g: GroupDescription) -> str:
    ordered = sorted(g.members, key=lambda m: (m.client_id, m.member_id))
    if g.streams is None:
        return _table(["member", "client id", "host", "instance id", "assigned partitions"], (
            [_e(m.member_id), _e(m.client_id), _e(m.host), _e(m.instance_id), _partitions(m.assignment)]
            for m in ordered), "members")
    topology = g.streams
    return _table(["member", "client id", "host", "instance id", "active tasks", "standby tasks", "warm-up tasks",
                   "topology epoch"], (
        [_e(m.member_id), _e(m.client_id), _e(m.host), _e(m.instance_id), _tasks(m.tasks.get("active", [])),
         _tasks(m.tasks.get("standby", [])), _tasks(m.tasks.get("warmup", [])),
         _e(m.topology_epoch) + (' <span class="stale">STALE_TOPOLOGY</span>' if _stale(m, topology) else "")]
        for m in ordered), "members")


def _topology(topology: StreamsTopology | None, members: Sequence[Member]) -> str:
    """A streams group's topology: its epochs, whether it is configured, its subtopologies, and
    the members running an older topology than the group's, as StreamsGroupDescribe tells."""
    if topology is None:
        return ""
    stale = [m for m in members if _stale(m, topology)]
    if topology.topology_epoch is None:
        status = "none yet: no member has sent a topology"
    elif topology.subtopologies is None:
        status = ("not configured: its source topics are missing, or internal topics are missing or "
                  "mis-partitioned (each member's heartbeat says which: MISSING_SOURCE_TOPICS, "
                  "MISSING_INTERNAL_TOPICS, INCORRECTLY_PARTITIONED_TOPICS)")
    else:
        status = f"configured, {len(topology.subtopologies)} subtopologies"
    facts = (f'<p class="facts topology"><span>topology epoch <b class="topology-epoch">'
             f"{_e(topology.topology_epoch)}</b></span><span>group epoch <b>{_e(topology.group_epoch)}</b></span>"
             f"<span>assignment epoch <b>{_e(topology.assignment_epoch)}</b></span>"
             f'<span>topology <b class="topology-status">{_e(status)}</b></span></p>')
    if stale:
        facts += (f'<p class="notice stale">STALE_TOPOLOGY: {len(stale)} of {len(members)} members run an older '
                  f"topology than the group's (epoch {_e(topology.topology_epoch)}): "
                  f"{_e(', '.join(m.client_id or m.member_id for m in stale))}</p>")
    table = "" if not topology.subtopologies else _table(
        ["subtopology", "source topics", "repartition sources", "repartition sinks", "changelogs"], (
            [_e(s.subtopology_id), _tasks(s.source_topics), _tasks(s.repartition_sources),
             _tasks(s.repartition_sinks), _tasks(s.changelogs)] for s in topology.subtopologies), "subtopologies")
    return f"<section><h2>Topology</h2>{facts}{table}</section>"


def group(state: GroupState, share_figures: ShareDeliveries | None = None) -> str:
    g = state.group
    members = _members(g)
    if g.group_type == "Share":
        offsets = _table(["partition", "start offset", "lag"], (
            [_e(f"{t}-{p}"), _e(start), _e(lag if lag >= 0 else None)]
            for (t, p), (start, lag) in sorted(state.share_offsets.items())), "offsets") + _share_figures(share_figures)
    else:
        offsets = _table(["partition", "committed", "log end", "lag", "lag (s)", "member"], (
            [_e(f"{r.topic}-{r.partition}"), _e(r.offset), _e(r.log_end), _e(r.lag),
             _seconds(state.lag_seconds.get((r.topic or "", r.partition or 0))), _e(r.client_id)]
            for r in state.offsets), "offsets")
    spans = _table(["started (UTC)", "generation", "cause", "duration", "members", "moved", "joined", "left",
                    "timed out", "reason"], (
        [_e(_ms(s.start_ms)), _e(s.generation), f'<span class="cause">{_e(s.cause)}</span>',
         _e(f"{s.duration_ms / 1000:.3f} s"), _e(f"{'-' if s.members_before is None else s.members_before}"
                                                 f"\u2192{'-' if s.members_after is None else s.members_after}"),
         _e(s.moved),
         _names(s.joined), _names(s.left), _names(s.timed_out + s.fenced), _e(s.reason)]
        for s in reversed(state.timeline.spans)), "rebalances")
    changes = _table(["time (UTC)", "change", "member"], (
        [_e(_ms(c.at_ms)), f'<span class="cause">{_e(c.cause)}</span>', _names([c.who])]
        for c in reversed(state.timeline.changes[-50:])), "changes")
    chart = render_svg(state.timeline) or "<p>No rebalance recorded.</p>"
    mine = [f for f in state.findings if f.group == g.group_id]
    return (f'<h1>Group <span class="group-id">{_e(g.group_id)}</span></h1>'
            f'<p class="facts"><span>type <b>{_e(g.group_type)}</b></span><span>state <b class="state">'
            f"{_e(g.state)}</b></span><span>members <b>{len(g.members)}</b></span><span>assignor "
            f"<b>{_e(g.assignor)}</b></span><span>coordinator <b>node {_e(g.coordinator.node_id)}</b></span>"
            f'<span>lag <b class="lag">{_e(state.lag)}</b> records, <b class="lag-seconds">'
            f"{_seconds(state.max_lag_seconds)}</b> s</span></p>"
            f"{_notice(state.error)}{_notice(state.journal_error)}"
            f'<div class="split"><section class="history"><h2>Rebalance timeline</h2>{chart}{spans}'
            f"<h2>Membership changes</h2>{changes}</section>"
            f'<aside class="doctor"><h2>Doctor</h2>{_findings(mine)}</aside></div>'
            f"{_topology(g.streams, g.members)}"
            f"<section><h2>Members</h2>{members}</section><section><h2>Offsets and lag</h2>{offsets}</section>")


# ---- actions ---------------------------------------------------------------------------------

def action_forms(group_id: str) -> str:
    """The forms of a group's actions (outside the live ``<main>``: an update must not wipe out
    what someone is typing). Each posts to ``/actions/<name>``, which asks for credentials."""
    hidden = f'<input type="hidden" name="group" value="{escape(group_id)}">'
    login = escape("/login?" + urlencode({"next": group_href(group_id)}))
    targets = "".join(f'<option value="{v}">{label}</option>' for v, label in (
        ("earliest", "earliest"), ("latest", "latest"), ("datetime", "a time (YYYY-MM-DDTHH:mm:SS, UTC with Z)"),
        ("shift", "a shift by N records"), ("offset", "an offset")))
    return (f'<section class="actions" id="actions"><h2>Actions</h2>'
            f"<p>Run as <code>kcoord groups</code> would run them for you: <a href=\"{login}\">sign in</a> "
            "with a user of this broker; the ACLs of the equivalent Kafka API apply. Offsets are reset only "
            "while the group has no members.</p>"
            f'<form class="action" id="reset-offsets" method="post" action="/actions/reset-offsets">{hidden}'
            '<h3>Reset offsets</h3><label>topic <input name="topic" placeholder="all topics, or topic, or '
            f'topic:0,1"></label> <label>to <select name="to">{targets}</select></label> '
            '<label>value <input name="value" placeholder="time, shift or offset"></label> '
            "<button>Reset</button></form>"
            f'<form class="action" id="delete-offsets" method="post" action="/actions/delete-offsets">{hidden}'
            '<h3>Delete offsets</h3><label>topic <input name="topic" placeholder="topic, or topic:0,1"></label> '
            "<button>Delete offsets</button></form>"
            f'<form class="action" id="delete-group" method="post" action="/actions/delete-group">{hidden}'
            "<h3>Delete the group</h3><p>Its offsets and the group itself; only an empty group.</p>"
            "<button>Delete group</button></form></section>")


def action_result(status: int, action: str, group_id: str, principal: str, summary: str, output: str) -> str:
    """The page an action answers with: how it ended, and what ``kcoord groups`` printed."""
    back = escape(group_href(group_id))
    css = "ok" if status == 200 else "error"
    pre = f'<pre id="output">{escape(output)}</pre>' if output.strip() else ""
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(action)} \u00b7 kcoord</title><link rel=\"stylesheet\" href=\"/static/console.css\">"
            "</head><body><header><a class=\"brand\" href=\"/\">kcoord</a></header><main>"
            f'<h1>{escape(action)} <span class="group-id">{escape(group_id)}</span></h1>'
            f'<p class="{css}" id="outcome" data-status="{status}">{escape(summary)}</p>'
            f"<p><small>as {escape(principal)}</small></p>"
            f"{pre}"
            f'<p><a href="{back}">Back to the group</a></p></main></body></html>')
