"""A group's rebalance timeline from its journal events (docs/journal.md): each rebalance (or a
share group's new assignment epoch) as a span with its cause, duration and who joined, left,
timed out or was fenced during it; every membership change as a point; the partitions (or tasks)
each member held between rebalances, rebuilt from the partitions each rebalance moved; drawn as
inline SVG."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from html import escape

Event = Mapping[str, object]

JOINED = frozenset({"new-member-joined", "static-member-rejoined"})
LEFT = frozenset({"member-left", "removed-by-admin"})
TIMED_OUT = frozenset({"session-timeout", "rebalance-timeout", "sync-timeout"})
FENCED = frozenset({"member-fenced"})

# A member event and the rebalance it starts are stamped by the same coordinator call, a few
# milliseconds apart at most: the change belongs to the span when within this margin of it.
MARGIN_MS = 50


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return None


def _text(value: object) -> str:
    return "" if value is None else str(value)


def who(event: Event) -> str:
    """``client/member`` of a member event (or of a rebalance's trigger), as ``--history`` names it."""
    detail = event.get("cause_detail")
    detail = detail if isinstance(detail, Mapping) else {}
    member = _text(event.get("member_id") or detail.get("member_id"))
    client = _text(event.get("client_id") or detail.get("client_id"))
    return f"{client}/{member}" if client and member else (member or client or "-")


@dataclass(frozen=True)
class Change:
    """A membership change: a member joined, left, timed out or was fenced."""

    at_ms: int
    cause: str
    who: str


@dataclass
class Span:
    """One rebalance, from its start until the group was Stable again (a share group's new epoch
    is a span of no duration)."""

    start_ms: int
    end_ms: int
    cause: str
    generation: int | None
    reason: str = ""
    members_before: int | None = None
    members_after: int | None = None
    moved: int | None = None
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    fenced: list[str] = field(default_factory=list)

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms

    def add(self, change: Change) -> None:
        for causes, names in ((JOINED, self.joined), (LEFT, self.left), (TIMED_OUT, self.timed_out),
                              (FENCED, self.fenced)):
            if change.cause in causes and change.who not in names:
                names.append(change.who)

    def summary(self) -> str:
        """One line: cause, duration, members and who came and went."""
        parts = [f"{self.cause}", f"{self.duration_ms / 1000:.3f} s"]
        if self.members_before is not None or self.members_after is not None:
            parts.append(f"members {_show(self.members_before)}\u2192{_show(self.members_after)}")
        for label, names in (("joined", self.joined), ("left", self.left), ("timed out", self.timed_out),
                             ("fenced", self.fenced)):
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        if self.reason:
            parts.append(f"reason: {self.reason}")
        return "; ".join(parts)


def _show(value: int | None) -> str:
    return "-" if value is None else str(value)


@dataclass(frozen=True)
class Move:
    """A partition (``topic-partition``) or task (``subtopology_partition``) changing hands when a
    rebalance settled: from one member to another, to a member (None before), or given up (None after)."""

    at_ms: int
    partition: str
    source: str | None
    target: str | None


@dataclass(frozen=True)
class Holding:
    """What one member held from ``start_ms`` until ``end_ms`` (None: still, as far as the journal tells)."""

    start_ms: int
    end_ms: int | None
    partitions: frozenset[str]


@dataclass
class Timeline:
    spans: list[Span]
    changes: list[Change]
    # Partitions moved at each rebalance, oldest first, and how many more the journal only counted
    # (it names 200 per rebalance at most): the holdings are then incomplete.
    moves: list[Move] = field(default_factory=list)
    unrecorded: int = 0
    # Member id -> ``client/member`` as the member events name it.
    names: dict[str, str] = field(default_factory=dict)

    @property
    def last(self) -> Span | None:
        return self.spans[-1] if self.spans else None

    def name(self, member_id: str) -> str:
        return self.names.get(member_id, member_id)

    def holdings(self) -> dict[str, list[Holding]]:
        """Per member (in the order they first got something), what it held between the rebalances
        that changed its share, rebuilt forward from the moves: a partition no rebalance in the
        journal moved is not known to anyone."""
        held: dict[str, set[str]] = {}
        out: dict[str, list[Holding]] = {}
        i = 0
        while i < len(self.moves):
            at = self.moves[i].at_ms
            touched: set[str] = set()
            while i < len(self.moves) and self.moves[i].at_ms == at:
                move = self.moves[i]
                if move.source is not None:
                    held.setdefault(move.source, set()).discard(move.partition)
                    touched.add(move.source)
                if move.target is not None:
                    held.setdefault(move.target, set()).add(move.partition)
                    touched.add(move.target)
                i += 1
            for member in sorted(touched):
                lane = out.setdefault(member, [])
                if lane and lane[-1].end_ms is None:
                    lane[-1] = Holding(lane[-1].start_ms, at, lane[-1].partitions)
                lane.append(Holding(at, None, frozenset(held[member])))
        return out


def _span(event: Event) -> Span | None:
    end = _int(event.get("timestamp"))
    if end is None:
        return None
    detail = event.get("cause_detail")
    detail = detail if isinstance(detail, Mapping) else {}
    if event.get("kind") == "assignment":
        return Span(end, end, _text(event.get("cause")) or "-", _int(event.get("generation")),
                    reason=_text(event.get("reason")), members_before=None,
                    members_after=_int(event.get("members")))
    start = _int(event.get("rebalance_start"))
    start = end if start is None or start > end else start
    reason = _text(detail.get("client_reason") or detail.get("trigger"))
    return Span(start, end, _text(event.get("cause")) or "-", _int(event.get("generation")), reason=reason,
                members_before=_int(event.get("members_before")), members_after=_int(event.get("members_after")),
                moved=_int(event.get("moved_count")))


def _moves(event: Event, at_ms: int) -> tuple[list[Move], int]:
    """The moves a rebalance (``moved``) or a share group's new epoch (``gained``/``lost``) names,
    and how many more it only counted."""
    if event.get("kind") == "assignment":
        gained, lost = event.get("gained"), event.get("lost")
        taken: dict[str, list[str]] = {}
        for member, parts in (lost.items() if isinstance(lost, Mapping) else ()):
            for tp in parts if isinstance(parts, list) else ():
                taken.setdefault(str(tp), []).append(str(member))
        moves = []
        for member, parts in (gained.items() if isinstance(gained, Mapping) else ()):
            for tp in parts if isinstance(parts, list) else ():
                givers = taken.get(str(tp))
                moves.append(Move(at_ms, str(tp), givers.pop() if givers else None, str(member)))
        moves += [Move(at_ms, tp, m, None) for tp, givers in taken.items() for m in givers]
        return moves, 0
    moved = event.get("moved")
    moves = []
    for entry in moved if isinstance(moved, list) else ():
        if not isinstance(entry, Mapping):
            continue
        # A streams group's tasks are named as its page names them: <subtopology>_<partition>.
        sub, topic, partition = entry.get("subtopology"), entry.get("topic"), _int(entry.get("partition"))
        if partition is None or (sub is None and topic is None):
            continue
        name = f"{sub}_{partition}" if sub is not None else f"{topic}-{partition}"
        source, target = entry.get("from"), entry.get("to")
        moves.append(Move(at_ms, name, None if source is None else str(source), None if target is None else str(target)))
    count = _int(event.get("moved_count"))
    return moves, max((count or 0) - len(moves), 0)


def build_timeline(events: Iterable[Event], group: str) -> Timeline:
    """The spans and changes of ``group``, oldest first. Each change inside a span (within
    ``MARGIN_MS`` of its ends) is named in it; the member a rebalance's cause names is too, even
    when its own event fell out of retention."""
    mine = sorted((e for e in events if e.get("group") == group), key=lambda e: _int(e.get("timestamp")) or 0)
    changes = [Change(_int(e.get("timestamp")) or 0, _text(e.get("cause")), who(e))
               for e in mine if e.get("kind") == "member"]
    names = {_text(e.get("member_id")): who(e) for e in mine if e.get("kind") == "member" and e.get("member_id")}
    spans: list[Span] = []
    moves: list[Move] = []
    unrecorded = 0
    for e in mine:
        if e.get("kind") not in ("rebalance", "assignment"):
            continue
        span = _span(e)
        if span is None:
            continue
        named, counted = _moves(e, span.end_ms)
        moves += named
        unrecorded += counted
        if e.get("kind") == "rebalance":
            trigger = who(e)
            if trigger != "-":
                span.add(Change(span.start_ms, span.cause, trigger))
        spans.append(span)
    for change in changes:
        near = [s for s in spans if s.start_ms - MARGIN_MS <= change.at_ms <= s.end_ms + MARGIN_MS]
        if near:  # rebalances a few milliseconds apart: the one it is inside, else the closest
            min(near, key=lambda s: (_distance(s, change.at_ms), -s.start_ms)).add(change)
    return Timeline(spans, changes, moves, unrecorded, names)


def _distance(span: Span, at_ms: int) -> int:
    if span.start_ms <= at_ms <= span.end_ms:
        return 0
    return min(abs(at_ms - span.start_ms), abs(at_ms - span.end_ms))


# ---- drawing ---------------------------------------------------------------------------------

WIDTH, LEFT_PAD, RIGHT_PAD = 960, 10, 10
SPAN_Y, SPAN_H, CHANGE_Y = 34, 26, 90
HEIGHT = 120
MIN_SPAN_PX = 4.0
# Below the spans, one lane per member: what it held between rebalances, and a line from lane to
# lane where a rebalance moved partitions. A big group draws the members that changed last.
LANES_Y, LANE_H, MAX_LANES = 128, 26, 16
# A tooltip names this many partitions at most (then how many more).
TITLE_PARTITIONS = 24


def _kind_of(cause: str) -> str:
    for name, causes in (("joined", JOINED), ("left", LEFT), ("timed-out", TIMED_OUT), ("fenced", FENCED)):
        if cause in causes:
            return name
    return "other"


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def _label(left: float, width: float, y: int, text: str) -> str:
    """A span's label, from its start; one in the right quarter ends at its end instead, inside the chart."""
    if left > WIDTH * 0.75:
        return f'<text x="{left + width:.1f}" y="{y}" text-anchor="end">{escape(text)}</text>'
    return f'<text x="{left:.1f}" y="{y}">{escape(text)}</text>'


def _listed(partitions: Iterable[str]) -> str:
    """Partitions in order (``t-2`` before ``t-10``), the first ``TITLE_PARTITIONS`` of them."""
    def key(name: str) -> tuple[str, int]:
        head, _, tail = name.rpartition("-" if "-" in name else "_")
        return (head, int(tail)) if tail.isdigit() else (name, -1)

    ordered = sorted(partitions, key=key)
    more = len(ordered) - TITLE_PARTITIONS
    return ", ".join(ordered[:TITLE_PARTITIONS]) + (f" and {more} more" if more > 0 else "") if ordered else "nothing"


def _lanes(timeline: Timeline) -> tuple[list[str], dict[str, list[Holding]]]:
    """The members drawn (the ``MAX_LANES`` whose share changed last, in the order they first got
    something) and every member's holdings."""
    holdings = timeline.holdings()
    latest = sorted(holdings, key=lambda m: -max(h.start_ms for h in holdings[m]))[:MAX_LANES]
    chosen = set(latest)
    return [m for m in holdings if m in chosen], holdings


def _assignments(timeline: Timeline, x: Callable[[int], float], t1: int) -> tuple[list[str], int]:
    """The lanes' SVG elements and their height."""
    lanes, holdings = _lanes(timeline)
    if not lanes:
        return [], 0
    row = {m: i for i, m in enumerate(lanes)}
    out = []
    for member, i in row.items():
        top = LANES_Y + i * LANE_H
        name = timeline.name(member)
        now = holdings[member][-1]  # the last holding lasts until now
        count = len(now.partitions)
        current = f"{count} now" + (f": {_listed(now.partitions)}" if 0 < count <= 4 else "")
        out.append(f'<g class="lane" data-member="{escape(name)}"><title>{escape(name)}</title>'
                   f'<text x="{LEFT_PAD}" y="{top + 9}">{escape(name if len(name) <= 60 else name[:59] + chr(0x2026))}'
                   f" \u00b7 {current}</text>")
        for h in holdings[member]:
            if not h.partitions:
                continue
            end = t1 if h.end_ms is None else h.end_ms
            left = x(h.start_ms)
            width = max(x(end) - left, MIN_SPAN_PX)
            until = "now" if h.end_ms is None else _clock(h.end_ms)
            current_attr = ' data-current="1"' if h.end_ms is None else ""
            title = f"{name} held {len(h.partitions)}: {_listed(h.partitions)} ({_clock(h.start_ms)} .. {until})"
            out.append(f'<g class="held" data-partitions="{escape(" ".join(sorted(h.partitions)))}"{current_attr}>'
                       f'<title>{escape(title)}</title><rect x="{left:.1f}" y="{top + 12}" width="{width:.1f}" height="9" rx="1"/></g>')
        out.append("</g>")
    # One line per rebalance and pair of members, however many partitions went that way.
    grouped: dict[tuple[int, str | None, str | None], list[str]] = {}
    for move in timeline.moves:
        grouped.setdefault((move.at_ms, move.source, move.target), []).append(move.partition)
    for (at, source, target), parts in grouped.items():
        if source not in row and target not in row:
            continue
        cx = x(at)
        src, dst = timeline.name(source) if source else "", timeline.name(target) if target else ""
        what = (f"{len(parts)} from {src or 'nobody'} to {dst or 'nobody'} at {_clock(at)}: {_listed(parts)}")
        attrs = (f'class="move" data-from="{escape(src)}" data-to="{escape(dst)}" '
                 f'data-partitions="{escape(" ".join(sorted(parts)))}"')
        if source in row and target in row:
            y1, y2 = LANES_Y + row[source] * LANE_H + 16, LANES_Y + row[target] * LANE_H + 16
            out.append(f"<g {attrs}><title>{escape(what)}</title>"
                       f'<line x1="{cx:.1f}" y1="{y1}" x2="{cx:.1f}" y2="{y2}"/>'
                       f'<circle cx="{cx:.1f}" cy="{y2}" r="3.5"/></g>')
        else:  # from or to nobody, or a member not drawn: a mark on the one lane drawn
            y = LANES_Y + row[target if target in row else source or ""] * LANE_H + 16
            out.append(f"<g {attrs}><title>{escape(what)}</title>"
                       f'<circle class="{"in" if target in row else "out"}" cx="{cx:.1f}" cy="{y}" r="3.5"/></g>')
    height = len(lanes) * LANE_H
    hidden = len(holdings) - len(lanes)
    notes = []
    if hidden:
        notes.append(f"{hidden} more members not drawn (those whose share changed last are)")
    if timeline.unrecorded:
        notes.append(f"{timeline.unrecorded} moves only counted by the journal: these holdings are incomplete")
    if notes:
        out.append(f'<text class="axis lanes-note" x="{LEFT_PAD}" y="{LANES_Y + height + 10}">'
                   f"{escape('; '.join(notes))}</text>")
        height += 14
    return out, height + 8


def render_svg(timeline: Timeline) -> str:
    """The timeline as an SVG chart: a bar per span (width its duration, at least a few pixels so
    a quick one shows), labelled with its cause, above a mark per membership change, and below
    them a lane per member with what it held between rebalances and a line from the member a
    partition left to the one it went to; each element has a tooltip (``<title>``) with the
    details. Empty when there is nothing to draw."""
    times = [t for s in timeline.spans for t in (s.start_ms, s.end_ms)] + [c.at_ms for c in timeline.changes]
    if not times:
        return ""
    t0, t1 = min(times), max(times)
    scale = (WIDTH - LEFT_PAD - RIGHT_PAD) / max(t1 - t0, 1)

    def x(ms: int) -> float:
        return LEFT_PAD + (ms - t0) * scale

    lanes, lanes_height = _assignments(timeline, x, t1)
    height = HEIGHT + (lanes_height and LANES_Y - HEIGHT + lanes_height)
    out = [f'<svg class="timeline" role="img" viewBox="0 0 {WIDTH} {height}" width="100%" height="{height}" '
           f'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">',
           f'<text class="axis" x="{LEFT_PAD}" y="{HEIGHT - 4}">{_clock(t0)} UTC</text>',
           f'<text class="axis" x="{WIDTH - RIGHT_PAD}" y="{HEIGHT - 4}" text-anchor="end">{_clock(t1)} UTC</text>',
           f'<line class="axis" x1="{LEFT_PAD}" y1="{CHANGE_Y}" x2="{WIDTH - RIGHT_PAD}" y2="{CHANGE_Y}"/>']
    for i, span in enumerate(timeline.spans):
        left = x(span.start_ms)
        width = max(x(span.end_ms) - left, MIN_SPAN_PX)
        title = escape(f"generation {_show(span.generation)} at {_clock(span.start_ms)}: {span.summary()}")
        out.append(f'<g class="span cause-{_kind_of(span.cause)}" data-cause="{escape(span.cause)}">'
                   f'<title>{title}</title>'
                   f'<rect x="{left:.1f}" y="{SPAN_Y}" width="{width:.1f}" height="{SPAN_H}" rx="2"/>'
                   f"{_label(left, width, SPAN_Y - 6 - (i % 2) * 12, span.cause)}</g>")
    for change in timeline.changes:
        cx = x(change.at_ms)
        out.append(f'<g class="change cause-{_kind_of(change.cause)}"><title>'
                   f'{escape(f"{_clock(change.at_ms)} {change.cause}: {change.who}")}</title>'
                   f'<circle cx="{cx:.1f}" cy="{CHANGE_Y}" r="5"/></g>')
    out += lanes
    out.append("</svg>")
    return "".join(out)
