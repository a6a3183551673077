"""A group's rebalance timeline from its journal events, and its drawing."""

from __future__ import annotations

from broker.console.timeline import build_timeline, render_svg
from tests.unit.console.events import EVENTS, T0, member, rebalance


def test_each_rebalance_is_a_span_with_its_cause_duration_and_who_came_and_went() -> None:
    timeline = build_timeline(EVENTS, "billing")
    assert [(s.generation, s.cause, s.duration_ms) for s in timeline.spans] == [
        (1, "new-member-joined", 3000), (2, "member-left", 400), (3, "new-member-joined", 1000),
        (4, "session-timeout", 250)]
    first, left, _, timed_out = timeline.spans
    assert first.joined == ["alpha/alpha-1", "beta/beta-1"]
    assert left.left == ["beta/beta-1"] and left.reason == "deploying" and not left.joined
    assert timed_out.timed_out == ["gamma/gamma-1"] and (timed_out.members_before, timed_out.members_after) == (2, 1)
    assert timeline.last is timed_out


def test_the_membership_changes_are_the_groups_own_oldest_first() -> None:
    changes = build_timeline(EVENTS, "billing").changes
    assert [(c.at_ms - T0, c.cause, c.who) for c in changes] == [
        (0, "new-member-joined", "alpha/alpha-1"), (2, "new-member-joined", "beta/beta-1"),
        (10_000, "member-left", "beta/beta-1"), (20_000, "new-member-joined", "gamma/gamma-1"),
        (40_000, "session-timeout", "gamma/gamma-1")]


def test_the_trigger_is_named_even_when_its_member_event_is_gone() -> None:
    only_summary = [e for e in EVENTS if e["kind"] == "rebalance" and e["generation"] == 4]
    [span] = build_timeline(only_summary, "billing").spans
    assert span.timed_out == ["gamma/gamma-1"]


def test_a_share_groups_new_epoch_is_a_span_of_no_duration() -> None:
    event = {"kind": "assignment", "group": "s", "group_type": "share", "timestamp": T0, "generation": 3,
             "cause": "member-left", "reason": "bye", "members": 2}
    [span] = build_timeline([event], "s").spans
    assert (span.cause, span.duration_ms, span.generation, span.members_after) == ("member-left", 0, 3, 2)


def test_malformed_fields_do_not_break_the_timeline() -> None:
    events = [{"kind": "rebalance", "group": "g", "timestamp": "soon", "cause": None},
              {"kind": "rebalance", "group": "g", "timestamp": T0, "rebalance_start": T0 + 5, "cause_detail": []},
              {"kind": "member", "group": "g", "timestamp": T0, "cause": "member-left"}]
    [span] = build_timeline(events, "g").spans
    assert (span.cause, span.duration_ms) == ("-", 0)


def test_the_chart_draws_every_span_and_change_with_a_tooltip() -> None:
    svg = render_svg(build_timeline(EVENTS, "billing"))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('<g class="span') == 4 and svg.count('<g class="change') == 5
    assert 'data-cause="session-timeout"' in svg and "timed out: gamma/gamma-1" in svg
    assert "left: beta/beta-1" in svg and "reason: deploying" in svg


def test_names_are_escaped_in_the_chart() -> None:
    event = {"kind": "rebalance", "group": "g", "timestamp": T0, "cause": "<script>",
             "cause_detail": {"client_id": "<b>", "member_id": "m"}}
    svg = render_svg(build_timeline([event], "g"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "<b>" not in svg


def test_nothing_to_draw_is_no_chart() -> None:
    assert render_svg(build_timeline(EVENTS, "nobody")) == ""


def test_a_change_belongs_to_the_rebalance_it_is_inside_when_they_are_milliseconds_apart() -> None:
    events = [member(0, "new-member-joined", "a", "a-1"), rebalance(0, 3, 1, "new-member-joined", 0, 1),
              member(4, "new-member-joined", "b", "b-1"), rebalance(4, 15, 2, "new-member-joined", 1, 2),
              member(16, "new-member-joined", "c", "c-1"), rebalance(16, 500, 3, "new-member-joined", 2, 3)]
    spans = build_timeline(events, "billing").spans
    assert [s.joined for s in spans] == [["a/a-1"], ["b/b-1"], ["c/c-1"]]
