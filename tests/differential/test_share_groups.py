"""Share groups (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe, ListGroups with type ``share``)
against Apache Kafka 4.4 and kcoord: epochs, errors and the partitions each member is given.

Members name themselves, with the same ids on both brokers; assignments are compared by topic
name (each broker makes its own topic ids)."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from tests.differential.consumer_ops import create_topics, member_id
from tests.differential.harness import Pair, Target, unique
from tests.differential.share_ops import heartbeat, until_assigned

pytestmark = pytest.mark.differential


def describe(c: WireClient, *groups: str) -> ShareGroupDescribeResponse:
    answer: ShareGroupDescribeResponse = c.call(77, 1, ShareGroupDescribeRequest(group_ids=list(groups)))
    for g in answer.groups:
        for m in g.members:
            m.assignment.topic_partitions.sort(key=lambda t: t.topic_name)
            for t in m.assignment.topic_partitions:
                t.partitions.sort()
                t.topic_id = b""
            m.subscribed_topic_names.sort()
    return answer


def test_one_member_joins_and_heartbeats(pair: Pair) -> None:
    group, topic = unique("share"), unique("share-t")

    def scenario(t: Target) -> object:
        c = t.client("share-consumer")
        create_topics(c, {topic: 2})
        mid = member_id(group)
        joined = heartbeat(c, group, mid, 0, [topic])
        assigned = until_assigned(c, group, mid, joined["member_epoch"])  # type: ignore[index, arg-type]
        steady = heartbeat(c, group, mid, assigned["member_epoch"])  # type: ignore[arg-type]
        return {"joined": joined, "assigned": assigned, "steady": steady, "described": describe(c, group)}

    answers = pair.compare(scenario)
    assert answers["joined"]["assignment"] == {}  # type: ignore[index]
    assert answers["assigned"]["assignment"] == {topic: [0, 1]}  # type: ignore[index]


def test_two_members_on_one_partition_both_get_it(pair: Pair) -> None:
    group, topic = unique("share-two"), unique("share-two-t")

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        create_topics(a, {topic: 1})
        ma, mb = member_id(group + "a"), member_id(group + "b")
        joined = heartbeat(a, group, ma, 0, [topic])
        steps = [until_assigned(a, group, ma, joined["member_epoch"])]  # type: ignore[arg-type]
        steps.append(heartbeat(b, group, mb, 0, [topic]))
        steps.append(heartbeat(a, group, ma, steps[0]["member_epoch"]))  # type: ignore[arg-type]
        return {"member_ids": [ma, mb], "steps": dict(enumerate(steps)), "described": describe(a, group)}

    answers = pair.compare(scenario)
    members = answers["described"]["groups"][0]["members"]  # type: ignore[index]
    assert [m["assignment"]["topic_partitions"][0]["partitions"] for m in members] == [[0], [0]]


def test_heartbeat_errors(pair: Pair) -> None:
    group, topic = unique("share-errors"), unique("share-errors-t")
    nowhere, missing = unique("share-none"), unique("share-missing")

    def scenario(t: Target) -> object:
        c = t.client("share-consumer")
        create_topics(c, {topic: 1})
        mid = member_id(group)
        joined = heartbeat(c, group, mid, 0, [topic])
        epoch = joined["member_epoch"]  # type: ignore[index]
        return {
            "unknown_group": heartbeat(c, nowhere, mid, 1),
            "unknown_member": heartbeat(c, group, member_id("nobody"), 1),
            "fenced_epoch": heartbeat(c, group, mid, epoch + 5),  # type: ignore[operator]
            "empty_member": heartbeat(c, group, "", 0, [topic]),
            "no_subscription": heartbeat(c, group, member_id("other"), 0, None),
            "bad_epoch": heartbeat(c, group, mid, -2),
            "empty_group": heartbeat(c, "", mid, 0, [topic]),
            "leave": heartbeat(c, group, mid, -1),
            "leave_again": heartbeat(c, group, mid, -1),
            "described": describe(c, group, missing),
        }

    pair.compare(scenario)


def test_list_groups_shows_share_groups(pair: Pair) -> None:
    group, topic = unique("share-list"), unique("share-list-t")

    def scenario(t: Target) -> object:
        c = t.client("share-consumer")
        create_topics(c, {topic: 1})
        heartbeat(c, group, member_id(group), 0, [topic])
        listed = c.call(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"]))
        return [g for g in listed.groups if g.group_id == group]

    answers = pair.compare(scenario)
    assert answers and answers[0]["group_type"] == "share"  # type: ignore[index]


def test_other_protocols_on_a_share_group_id(pair: Pair) -> None:
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    from protocol.messages.offset_commit import OffsetCommitRequest
    from tests.differential.ops import join

    group, topic = unique("share-other"), unique("share-other-t")

    def scenario(t: Target) -> object:
        c = t.client("share-consumer")
        create_topics(c, {topic: 1})
        heartbeat(c, group, member_id(group), 0, [topic])
        consumer = c.call(68, 1, ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id(group + "c"), member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic], topic_partitions=[]))
        classic = join(c, group)
        commit = c.call(8, 9, OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                                  topics=[OffsetCommitRequest.Topic(name=topic, partitions=[
                                                      OffsetCommitRequest.Topic.Partition(partition_index=0,
                                                                                          committed_offset=0)])]))
        from tests.differential.ops import describe as describe_classic

        classic_described = describe_classic(c, group).groups[0]
        return {"consumer": consumer.error_code, "classic": classic.error_code,
                "classic_described": (classic_described.error_code, classic_described.group_state,
                                      classic_described.protocol_type),
                "commit": [p.error_code for tp in commit.topics for p in tp.partitions],
                "described": describe(c, group).groups[0].group_state}

    pair.compare(scenario)


def test_assignment_batching_holds_a_new_member_until_the_interval_has_passed(pair: Pair) -> None:
    """KIP-1263 (Kafka 4.3+): with the group's share.assignment.interval.ms at 10 s, the partitions
    initialized after the first member joined, and a second member joining right after they are
    assigned, each wait for a heartbeat once the interval has passed. The reference runs with the
    broker default 0 (testkit.kafka): the group config overrides it on both brokers."""
    from tests.differential.config_ops import GROUP, SET, incremental, settle
    from tests.differential.harness import retry

    group, topic = unique("share-1263"), unique("share-1263-t")

    def until(c: WireClient, mid: str, epoch: int, done: Any) -> dict[str, object]:
        """Heartbeats (at the epoch each answer gives) until ``done`` holds of an answer."""
        at = [epoch]

        def beat() -> Any:
            answer: Any = heartbeat(c, group, mid, at[0])
            at[0] = answer["member_epoch"]
            return answer

        # The interval, and a loaded machine's heartbeats.
        answer = retry(beat, lambda r: bool(r["error_code"] or done(r)), timeout=90)
        assert answer["error_code"] or done(answer), f"no assignment in 90 s: {answer}"
        return answer  # type: ignore[no-any-return]

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        create_topics(a, {topic: 2})
        [altered] = incremental(a, GROUP, group, ("share.assignment.interval.ms", SET, "10000"))
        settle(t)
        ma, mb = member_id(group + "a"), member_id(group + "b")
        joined = heartbeat(a, group, ma, 0, [topic])
        first = until(a, ma, joined["member_epoch"], lambda r: r["assignment"])  # type: ignore[index, arg-type]
        held_back = heartbeat(b, group, mb, 0, [topic])
        second = until(b, mb, held_back["member_epoch"], lambda r: r["assignment"])  # type: ignore[index, arg-type]
        shared = until(a, ma, first["member_epoch"],  # type: ignore[arg-type]
                       lambda r: r["assignment"] is not None and len(r["assignment"][topic]) == 1)
        # Which of the two partitions each member gets follows the topic's id, which each broker
        # draws at random: compared is how many each holds, and that together they hold both.
        held = {k: {**r, "assignment": len(r["assignment"][topic])}  # type: ignore[index]
                for k, r in (("second", second), ("shared", shared))}
        together = sorted(second["assignment"][topic] + shared["assignment"][topic])  # type: ignore[index, operator]
        return {"altered": altered, "joined": joined, "first": first, "held_back": held_back, **held,
                "together": together, "members": len(describe(a, group).groups[0].members)}

    answers = pair.compare(scenario, together=True)  # mostly waiting out two intervals
    assert answers["first"]["assignment"] == {topic: [0, 1]}  # type: ignore[index]
    assert answers["held_back"]["assignment"] == {}  # type: ignore[index]
    assert answers["second"]["assignment"] == 1 and answers["together"] == [0, 1]  # type: ignore[index]
