"""A group's rebalance timeline from its journal events (docs/journal.md): each rebalance (or a
share group's new assignment epoch) as a span with its cause, duration and who joined, left,
timed out or was fenced during it; every membership change as a point; drawn as inline SVG."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
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


@dataclass
class Timeline:
    spans: list[Span]
    changes: list[Change]

    @property
    def last(self) -> Span | None:
        return self.spans[-1] if self.spans else None


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


def build_timeline(events: Iterable[Event], group: str) -> Timeline:
    """The spans and changes of ``group``, oldest first. Each change inside a span (within
    ``MARGIN_MS`` of its ends) is named in it; the member a rebalance's cause names is too, even
    when its own event fell out of retention."""
    mine = sorted((e for e in events if e.get("group") == group), key=lambda e: _int(e.get("timestamp")) or 0)
    changes = [Change(_int(e.get("timestamp")) or 0, _text(e.get("cause")), who(e))
               for e in mine if e.get("kind") == "member"]
    spans: list[Span] = []
    for e in mine:
        if e.get("kind") not in ("rebalance", "assignment"):
            continue
        span = _span(e)
        if span is None:
            continue
        if e.get("kind") == "rebalance":
            trigger = who(e)
            if trigger != "-":
                span.add(Change(span.start_ms, span.cause, trigger))
        spans.append(span)
    for change in changes:
        near = [s for s in spans if s.start_ms - MARGIN_MS <= change.at_ms <= s.end_ms + MARGIN_MS]
        if near:  # rebalances a few milliseconds apart: the one it is inside, else the closest
            min(near, key=lambda s: (_distance(s, change.at_ms), -s.start_ms)).add(change)
    return Timeline(spans, changes)


def _distance(span: Span, at_ms: int) -> int:
    if span.start_ms <= at_ms <= span.end_ms:
        return 0
    return min(abs(at_ms - span.start_ms), abs(at_ms - span.end_ms))


# ---- drawing ---------------------------------------------------------------------------------

WIDTH, LEFT_PAD, RIGHT_PAD = 960, 10, 10
SPAN_Y, SPAN_H, CHANGE_Y = 34, 26, 90
HEIGHT = 120
MIN_SPAN_PX = 4.0


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


def render_svg(timeline: Timeline) -> str:
    """The timeline as an SVG chart: a bar per span (width its duration, at least a few pixels so
    a quick one shows), labelled with its cause, above a mark per membership change; each element
    has a tooltip (``<title>``) with the details. Empty when there is nothing to draw."""
    times = [t for s in timeline.spans for t in (s.start_ms, s.end_ms)] + [c.at_ms for c in timeline.changes]
    if not times:
        return ""
    t0, t1 = min(times), max(times)
    scale = (WIDTH - LEFT_PAD - RIGHT_PAD) / max(t1 - t0, 1)

    def x(ms: int) -> float:
        return LEFT_PAD + (ms - t0) * scale

    out = [f'<svg class="timeline" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
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
    out.append("</svg>")
    return "".join(out)
