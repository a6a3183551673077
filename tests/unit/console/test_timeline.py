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
    events: list[dict[str, object]] = [{"kind": "rebalance", "group": "g", "timestamp": "soon", "cause": None},
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


def _moved(*moves: tuple[str, int, str | None, str | None]) -> list[dict[str, object]]:
    return [{"topic": t, "partition": p, "from": a, "to": b} for t, p, a, b in moves]


# Two members share t-0..t-2; beta leaves and its partition moves to alpha.
MOVES = [
    member(0, "new-member-joined", "alpha", "alpha-1"), member(2, "new-member-joined", "beta", "beta-1"),
    {**rebalance(0, 3000, 1, "new-member-joined", 0, 2),
     "moved": _moved(("t", 0, None, "alpha-1"), ("t", 1, None, "alpha-1"), ("t", 2, None, "beta-1")),
     "moved_count": 3},
    member(10_000, "member-left", "beta", "beta-1"),
    {**rebalance(10_000, 10_400, 2, "member-left", 2, 1), "moved": _moved(("t", 2, "beta-1", "alpha-1")),
     "moved_count": 1},
]


def test_each_members_holdings_are_rebuilt_from_the_partitions_each_rebalance_moved() -> None:
    timeline = build_timeline(MOVES, "billing")
    assert [(m.at_ms - T0, m.partition, m.source, m.target) for m in timeline.moves] == [
        (3000, "t-0", None, "alpha-1"), (3000, "t-1", None, "alpha-1"), (3000, "t-2", None, "beta-1"),
        (10_400, "t-2", "beta-1", "alpha-1")]
    held = {m: [(h.start_ms - T0, None if h.end_ms is None else h.end_ms - T0, sorted(h.partitions)) for h in hs]
            for m, hs in timeline.holdings().items()}
    assert held == {"alpha-1": [(3000, 10_400, ["t-0", "t-1"]), (10_400, None, ["t-0", "t-1", "t-2"])],
                    "beta-1": [(3000, 10_400, ["t-2"]), (10_400, None, [])]}
    assert timeline.unrecorded == 0 and timeline.name("beta-1") == "beta/beta-1"


def test_the_chart_draws_a_lane_per_member_and_the_move_from_the_one_that_left() -> None:
    svg = render_svg(build_timeline(MOVES, "billing"))
    assert svg.count('<g class="lane"') == 2
    assert 'data-member="alpha/alpha-1"' in svg and 'data-member="beta/beta-1"' in svg
    # The move of t-2 is a line from beta's lane down or up to alpha's, with its tooltip.
    assert ('<g class="move" data-from="beta/beta-1" data-to="alpha/alpha-1" data-partitions="t-2">'
            "<title>1 from beta/beta-1 to alpha/alpha-1 at ") in svg and "<line " in svg
    # Alpha holds everything from then on; beta's bar ends when it left.
    assert '<g class="held" data-partitions="t-0 t-1 t-2" data-current="1">' in svg
    assert '<g class="held" data-partitions="t-2"><title>beta/beta-1 held 1: t-2 (' in svg
    assert "viewBox=\"0 0 960 188\"" in svg  # taller by the two lanes


def test_a_streams_groups_tasks_and_a_share_groups_epochs_are_moves_too() -> None:
    streams = {**rebalance(0, 10, 1, "new-member-joined", 0, 1),
               "moved": [{"subtopology": "0", "partition": 3, "from": None, "to": "s-1"}], "moved_count": 1}
    assert [(m.partition, m.target) for m in build_timeline([streams], "billing").moves] == [("0_3", "s-1")]
    share = {"kind": "assignment", "group": "s", "timestamp": T0, "generation": 3, "cause": "member-left",
             "gained": {"b": ["t-0", "t-1"]}, "lost": {"a": ["t-0"], "c": ["t-5"]}}
    moves = {(m.partition, m.source, m.target) for m in build_timeline([share], "s").moves}
    assert moves == {("t-0", "a", "b"), ("t-1", None, "b"), ("t-5", "c", None)}


def test_a_big_group_draws_the_members_that_changed_last_and_says_what_it_left_out() -> None:
    formed = {**rebalance(0, 10, 1, "new-member-joined", 0, 40),
              "moved": _moved(*(("t", i, None, f"m-{i:02}") for i in range(40))), "moved_count": 1000}
    moved = {**rebalance(100, 110, 2, "member-left", 40, 39), "moved": _moved(("t", 0, "m-00", "m-39")),
             "moved_count": 1}
    timeline = build_timeline([formed, moved], "billing")
    assert timeline.unrecorded == 960
    svg = render_svg(timeline)
    assert svg.count('<g class="lane"') == 16
    assert 'data-member="m-00"' in svg and 'data-member="m-39"' in svg  # the two the last rebalance changed
    assert "24 more members not drawn" in svg and "960 moves only counted by the journal" in svg


def test_without_moves_the_chart_has_no_lanes() -> None:
    svg = render_svg(build_timeline(EVENTS, "billing"))
    assert '<g class="lane"' not in svg and 'viewBox="0 0 960 120"' in svg
