"""Any sequence of ConsumerGroupHeartbeats, well-formed or not, gets an answer with one of Kafka's
error codes and leaves every consumer group consistent: no partition held by two members, and a
restart that replays the records written rebuilds the same groups."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinators.group.core import CoordinatorConfig
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from tests.unit.coordinators.group.core.harness import Harness, Topics

CONFIG = CoordinatorConfig(consumer_session_timeout_ms=6000, consumer_heartbeat_interval_ms=500)
TOPIC_IDS = [Topics.id_of("t"), Topics.id_of("u"), bytes(16)]
ANSWERS = {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH,
           ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNSUPPORTED_ASSIGNOR,
           ErrorCode.INVALID_REGULAR_EXPRESSION, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_MAX_SIZE_REACHED}

owned = st.one_of(st.none(), st.lists(st.builds(
    ConsumerGroupHeartbeatRequest.TopicPartitions, topic_id=st.sampled_from(TOPIC_IDS),
    partitions=st.lists(st.integers(-1, 5), max_size=4)), max_size=3))
heartbeats = st.builds(
    ConsumerGroupHeartbeatRequest,
    group_id=st.sampled_from(["g", "h", ""]),
    member_id=st.sampled_from(["a", "b", "c", ""]),
    member_epoch=st.sampled_from([0, 0, 1, 2, 3, -1, -2, 7, -5]),
    instance_id=st.sampled_from([None, None, "i1", "i2", ""]),
    rack_id=st.sampled_from([None, "r", ""]),
    rebalance_timeout_ms=st.sampled_from([-1, 1000, 30_000]),
    subscribed_topic_names=st.one_of(st.none(), st.lists(st.sampled_from(["t", "u", "missing"]), max_size=3)),
    subscribed_topic_regex=st.sampled_from([None, None, "t|u", "(", ""]),
    server_assignor=st.sampled_from([None, None, "uniform", "range", "sticky"]),
    topic_partitions=owned,
)
steps = st.lists(st.tuples(heartbeats, st.integers(0, 4000), st.sampled_from([0, 1])), min_size=1, max_size=30)


def held(h: Harness) -> None:
    for group in h.shard.state.consumer_groups.values():
        seen: set[tuple[bytes, int]] = set()
        for member in group.members.values():
            for part in (member.assigned_partitions, member.partitions_pending_revocation):
                for topic, partitions in part.items():
                    for p in partitions:
                        assert (topic, p) not in seen, f"{group.group_id}: {topic.hex()}-{p} held twice"
                        seen.add((topic, p))


def view(h: Harness) -> dict[str, object]:
    return {gid: (g.group_epoch, g.assignment_epoch, dict(g.target_assignment),
                  {mid: (m.member_epoch, m.state, m.assigned_partitions, m.partitions_pending_revocation)
                   for mid, m in g.members.items()})
            for gid, g in h.shard.state.consumer_groups.items()}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps)
def test_any_heartbeat_sequence_is_answered_and_leaves_groups_consistent(steps: list) -> None:
    h = Harness(CONFIG)
    for req, sleep_ms, version in steps:
        ctx = h.ctx(version)
        h.op(h.shard.consumer_group_heartbeat(req, ctx, h.now))
        assert h.response(ctx.token).error_code in ANSWERS
        held(h)
        h.sleep(sleep_ms)
        held(h)
    before = view(h)
    h.restart()
    assert view(h) == before
    assert h.shard.state.replay_anomalies == 0
