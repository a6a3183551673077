"""Regular expression subscriptions of a consumer group, resolved as Kafka 4.4 resolves them: off
the heartbeat path (a timer of the shard), at most once per 10 s per group, when an expression is
new, a topic was created or the refresh interval passed; written as ConsumerGroupRegularExpression
records, and the group epoch bumped so that a later heartbeat assigns what they matched. The clock
is the harness's: every ``now`` is explicit."""

from __future__ import annotations

from broker.coordinators.group.core import CoordinatorConfig
from broker.coordinators.group.core.base.timers import consumer_regex_key
from broker.coordinators.group.core.consumer_regex_refresh import MIN_INTERVAL_MS
from protocol.payloads.offsets_log_records import (
    ConsumerGroupMetadataRecord,
    ConsumerGroupRegularExpressionRecord,
)
from tests.unit.coordinators.group.core.consumer.members import CONFIG, Member, converge, group_view
from tests.unit.coordinators.group.core.harness import Harness, Topics


def _written_regexes(h: Harness) -> list[tuple[str, object]]:
    return [(r.regular_expression, None if r.value is None else r.value.topics)
            for r in h.records() if isinstance(r, ConsumerGroupRegularExpressionRecord)]


def _refresh_times(h: Harness) -> list[int]:
    return [r.value.timestamp for r in h.records()
            if isinstance(r, ConsumerGroupRegularExpressionRecord) and r.value is not None]


def _epochs(h: Harness) -> list[int]:
    return [r.value.epoch for r in h.records() if isinstance(r, ConsumerGroupMetadataRecord) and r.value is not None]


def _partitions(*topics: tuple[str, int]) -> set[tuple[bytes, int]]:
    return {(Topics.id_of(name), p) for name, count in topics for p in range(count)}


def _create_topic(h: Harness, name: str, partitions: int) -> None:
    """A topic created, and the shard told of it as the broker tells it."""
    h.topics.set(name, partitions)
    h.op(h.shard.on_topics_changed({name}, h.now))


def _delete_topic(h: Harness, name: str) -> None:
    del h.topics.topics[name]
    h.topics.version += 1
    h.op(h.shard.on_topics_changed({name}, h.now))


def _beat_for(h: Harness, members: list[Member], ms: int) -> None:
    """``ms`` pass with every member heartbeating every 500 ms."""
    for _ in range(ms // 500):
        h.sleep(500)
        converge(members, rounds=1)


def test_the_heartbeat_that_brings_an_expression_is_not_given_its_topics() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2, "other": 2})
    m = Member(h, "m", regex="orders-.*")
    first = m.beat()
    assert first.error_code == 0 and first.assignment is not None and first.assignment.topic_partitions == []
    # The heartbeat wrote the member, not what its expression matches, and asked for a refresh now.
    assert not any(isinstance(r, ConsumerGroupRegularExpressionRecord) for r in h.last.records)
    assert consumer_regex_key("g") not in h.timers  # fired: the harness runs what is due after each operation
    # The refresh resolved it at that time and bumped the group epoch; the next heartbeat assigns.
    assert _written_regexes(h) == [("orders-.*", ["orders-eu"])]
    assert _refresh_times(h) == [h.now]
    assert h.shard.state.consumer_groups["g"].group_epoch > first.member_epoch
    second = m.beat()
    assert second.member_epoch == h.shard.state.consumer_groups["g"].group_epoch
    assert m.held() == _partitions(("orders-eu", 2))


def test_the_refresh_is_armed_for_the_heartbeats_time_and_runs_after_it() -> None:
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

    h = Harness(CONFIG, topics={"orders-eu": 2, "pay-eu": 1})

    def join(member_id: str, regex: str) -> None:
        req = ConsumerGroupHeartbeatRequest(
            group_id="g", member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30_000, subscribed_topic_names=None, subscribed_topic_regex=regex,
            server_assignor=None, topic_partitions=[])
        h.apply(h.shard.consumer_group_heartbeat(req, h.ctx(1), h.now))  # timers not run yet

    join("a", "orders-.*")
    assert h.timers[consumer_regex_key("g")] == h.now
    # A second expression while the refresh is pending asks for none more: the pending one
    # resolves every expression of the group.
    h.now += 1
    join("b", "pay-.*")
    assert h.timers[consumer_regex_key("g")] == h.now - 1
    assert _written_regexes(h) == []
    h.run_due()
    assert sorted(_written_regexes(h)) == [("orders-.*", ["orders-eu"]), ("pay-.*", ["pay-eu"])]
    assert _refresh_times(h) == [h.now, h.now]


def test_a_topic_created_is_picked_up_by_the_first_refresh_10_s_after_the_last() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2, "other": 2})
    m = Member(h, "m", regex="orders-.*")
    converge([m], rounds=2)
    resolved_at = h.now
    _beat_for(h, [m], 2000)
    _create_topic(h, "orders-us", 1)
    # Within 10 s of the last refresh, heartbeats do not resolve again.
    _beat_for(h, [m], MIN_INTERVAL_MS - 2000)
    assert h.now == resolved_at + MIN_INTERVAL_MS
    assert m.held() == _partitions(("orders-eu", 2))
    assert _refresh_times(h) == [resolved_at]
    # The first heartbeat after it asks; the refresh bumps the epoch; the one after assigns.
    epoch = m.epoch
    _beat_for(h, [m], 500)
    assert _refresh_times(h) == [resolved_at, h.now]
    assert _written_regexes(h)[-1] == ("orders-.*", ["orders-eu", "orders-us"])
    assert m.held() == _partitions(("orders-eu", 2))
    m.beat()
    assert m.epoch > epoch
    assert m.held() == _partitions(("orders-eu", 2), ("orders-us", 1))


def test_no_refresh_without_a_reason_until_the_refresh_interval() -> None:
    config = CoordinatorConfig(consumer_session_timeout_ms=6000, consumer_heartbeat_interval_ms=500,
                               consumer_assignment_interval_ms=0, consumer_regex_refresh_interval_ms=20_000)
    h = Harness(config, topics={"orders-eu": 2})
    m = Member(h, "m", regex="orders-.*")
    converge([m], rounds=2)
    resolved_at = h.now
    epochs = _epochs(h)
    _beat_for(h, [m], 20_000)
    assert _refresh_times(h) == [resolved_at]
    _beat_for(h, [m], 500)
    # Resolved again, to the same topics: written with its new time, no new epoch.
    assert _refresh_times(h) == [resolved_at, h.now]
    assert _epochs(h) == epochs


def test_a_deleted_topic_leaves_the_assignment_without_a_refresh() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2, "orders-us": 1})
    m = Member(h, "m", regex="orders-.*")
    converge([m], rounds=2)
    assert m.held() == _partitions(("orders-eu", 2), ("orders-us", 1))
    resolved_at = h.now
    _beat_for(h, [m], MIN_INTERVAL_MS + 1000)
    _delete_topic(h, "orders-us")
    converge([m], rounds=2)
    assert m.held() == _partitions(("orders-eu", 2))
    # The recorded resolution still names it: a deletion asks for no refresh (as in Kafka).
    assert _refresh_times(h) == [resolved_at]
    assert _written_regexes(h) == [("orders-.*", ["orders-eu", "orders-us"])]


def test_an_expression_already_resolved_is_assigned_at_once_and_the_last_user_deletes_it() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2, "t": 2})
    a = Member(h, "a", regex="orders-.*")
    converge([a], rounds=2)
    # b subscribes with the same expression: resolved already, so its join bumps the epoch and
    # the assignor shares the topic at once, with no refresh.
    b = Member(h, "b", regex="orders-.*")
    converge([a, b], rounds=3)
    assert a.held() | b.held() == _partitions(("orders-eu", 2)) and a.held() and b.held()
    assert len(_refresh_times(h)) == 1
    a.beat(epoch=-1)
    b.beat(epoch=-1)
    assert _written_regexes(h)[-1] == ("orders-.*", None)
    before = group_view(h)
    h.restart()
    assert group_view(h) == before
    assert h.shard.state.consumer_groups["g"].resolved_regexes == {}


def test_a_restart_loses_a_pending_refresh_and_the_next_heartbeat_asks_again() -> None:
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

    h = Harness(CONFIG, topics={"orders-eu": 2})
    req = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30_000, subscribed_topic_names=None, subscribed_topic_regex="orders-.*",
        server_assignor=None, topic_partitions=[])
    ctx = h.ctx(1)
    h.apply(h.shard.consumer_group_heartbeat(req, ctx, h.now))
    epoch = h.response(ctx.token).member_epoch
    h.restart()
    assert _written_regexes(h) == []
    m = Member(h, "m", regex="orders-.*")
    m.epoch = epoch
    converge([m], rounds=2)
    assert m.held() == _partitions(("orders-eu", 2))


def test_after_a_load_the_first_heartbeat_past_the_interval_refreshes_once() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2})
    m = Member(h, "m", regex="orders-.*")
    converge([m], rounds=2)
    resolved_at = h.now
    h.restart()
    # As Kafka's coordinator after a failover: the topics may have changed while it was away.
    _beat_for(h, [m], MIN_INTERVAL_MS + 500)
    assert _refresh_times(h) == [resolved_at, resolved_at + MIN_INTERVAL_MS + 500]
    _beat_for(h, [m], MIN_INTERVAL_MS + 500)
    assert len(_refresh_times(h)) == 2


def test_a_regex_leaves_out_the_topics_its_member_may_not_describe_and_replay_keeps_them_out() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2, "orders-us": 2, "other": 2})
    m = Member(h, "m", regex="orders-.*", may_describe=lambda topic: topic != "orders-us")
    converge([m], rounds=2)
    assert m.held() == _partitions(("orders-eu", 2))
    assert _written_regexes(h) == [("orders-.*", ["orders-eu"])]
    group = h.shard.state.consumer_groups["g"]
    assert group.resolved_regexes == {"orders-.*": frozenset({"orders-eu"})}
    assert "orders-us" not in group.subscribed_topic_names()
    before = group_view(h)
    h.restart()
    assert group_view(h) == before
    assert h.shard.state.consumer_groups["g"].resolved_regexes == {"orders-.*": frozenset({"orders-eu"})}
    _beat_for(h, [m], MIN_INTERVAL_MS + 1000)  # the same member refreshing after the restart finds the same
    assert m.held() == _partitions(("orders-eu", 2))


def test_a_refresh_is_filtered_by_the_member_whose_heartbeat_asked_for_it_until_the_next_refresh() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 4})
    everything = Member(h, "a", regex="orders-.*", may_describe=lambda topic: True)
    eu_only = Member(h, "b", regex="orders-.*", may_describe=lambda topic: topic == "orders-eu")
    converge([everything, eu_only])
    assert everything.held() | eu_only.held() == _partitions(("orders-eu", 4))

    # A new topic; b's heartbeat is the first past the interval: the group's expression is
    # resolved with b's rights, for every member, and a's later heartbeats do not resolve it again.
    _create_topic(h, "orders-us", 2)
    _beat_for(h, [eu_only, everything], MIN_INTERVAL_MS)
    h.sleep(500)
    eu_only.beat()
    converge([everything, eu_only], rounds=4)
    assert _written_regexes(h)[-1] == ("orders-.*", ["orders-eu"])
    assert everything.held() | eu_only.held() == _partitions(("orders-eu", 4))

    # b goes silent and is removed by its session timeout: no refresh, the resolution recorded
    # with b's rights still counts for the member left.
    for _ in range(14):
        h.sleep(500)
        everything.beat()
    assert set(h.shard.state.consumer_groups["g"].members) == {"a"}
    assert everything.held() == _partitions(("orders-eu", 4))

    # The next topic created is resolved at a's heartbeat, with a's rights.
    _create_topic(h, "orders-asia", 1)
    _beat_for(h, [everything], MIN_INTERVAL_MS)
    converge([everything], rounds=2)
    assert _written_regexes(h)[-1] == ("orders-.*", ["orders-asia", "orders-eu", "orders-us"])
    assert everything.held() == _partitions(("orders-eu", 4), ("orders-us", 2), ("orders-asia", 1))
    before = group_view(h)
    h.restart()
    assert group_view(h) == before


def test_a_member_subscribing_by_name_refreshes_the_groups_expressions_with_its_rights() -> None:
    h = Harness(CONFIG, topics={"orders-eu": 2, "t": 2})
    by_regex = Member(h, "r", regex="orders-.*", may_describe=lambda topic: True)
    by_name = Member(h, "n", topics=("t",), may_describe=lambda topic: topic != "orders-us")
    converge([by_regex, by_name])
    _create_topic(h, "orders-us", 2)
    _beat_for(h, [by_name, by_regex], MIN_INTERVAL_MS)
    h.sleep(500)
    by_name.beat()  # first past the interval since the topic came: it may not describe orders-us
    converge([by_regex, by_name], rounds=3)
    assert h.shard.state.consumer_groups["g"].resolved_regexes == {"orders-.*": frozenset({"orders-eu"})}
    assert by_regex.held() == _partitions(("orders-eu", 2))
