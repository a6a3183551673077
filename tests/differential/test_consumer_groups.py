"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe) against
Apache Kafka and kcoord: epochs, errors and the partitions each member is given, compared.

Members name themselves (ConsumerGroupHeartbeat v1), with the same ids on both brokers, so the
server-side assignors see the same members and must give each the same partitions. Assignments
are compared by topic name (each broker makes its own topic ids)."""

from __future__ import annotations

import pytest

from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
)
from protocol.messages.offset_commit import OffsetCommitRequest
from tests.differential.consumer_ops import (
    HB_V,
    Member,
    assignment_by_name,
    create_topics,
    describe,
    member_id,
    topic_names,
)
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import stable_member

pytestmark = pytest.mark.differential













def test_one_member_gets_every_partition(pair: Pair) -> None:
    group, one, two = unique("kip848"), unique("kip848-a"), unique("kip848-b")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {one: 2, two: 3})
        m = Member(c, group, member_id(group), topics=[one, two])
        joined = assignment_by_name(c, m.heartbeat())
        steady = assignment_by_name(c, m.heartbeat())
        return [joined, steady, describe(c, group)]

    answers = pair.compare(scenario)
    assert answers[0]["assignment"] == {one: [0, 1], two: [0, 1, 2]}  # type: ignore[index]


def test_two_members_share_the_partitions(pair: Pair) -> None:
    # One topic: with several, the uniform assignor orders topics by their ids, which each broker
    # draws at random, so which member gets which topic may legitimately differ.
    group, one = unique("kip848-two"), unique("kip848-two-a")

    def scenario(t: Target) -> object:
        a_conn, b_conn = t.client("a"), t.client("b")
        create_topics(a_conn, {one: 6})
        a = Member(a_conn, group, member_id(group + "a"), topics=[one])
        b = Member(b_conn, group, member_id(group + "b"), topics=[one])
        steps = [("a", assignment_by_name(a_conn, a.heartbeat())),
                 ("b", assignment_by_name(b_conn, b.heartbeat())),
                 ("a", assignment_by_name(a_conn, a.heartbeat())),
                 ("b", assignment_by_name(b_conn, b.heartbeat())),
                 ("a", assignment_by_name(a_conn, a.heartbeat())),
                 ("b", assignment_by_name(b_conn, b.heartbeat()))]
        return {"member_ids": [a.mid, b.mid], "steps": steps, "described": describe(a_conn, group)}

    answers = pair.compare(scenario)
    final = answers["described"]["groups"][0]  # type: ignore[index]
    assert final["group_state"] == "Stable"
    assert sorted(len(m["assignment"]["topic_partitions"][0]["partitions"]) for m in final["members"]) == [3, 3]


def test_two_members_share_two_topics_evenly(pair: Pair) -> None:
    group, one, two = unique("kip848-even"), unique("kip848-even-a"), unique("kip848-even-b")

    def scenario(t: Target) -> object:
        a_conn, b_conn = t.client("a"), t.client("b")
        create_topics(a_conn, {one: 3, two: 3})
        a = Member(a_conn, group, member_id(group + "a"), topics=[one, two])
        b = Member(b_conn, group, member_id(group + "b"), topics=[one, two])
        codes = [a.heartbeat().error_code, b.heartbeat().error_code, a.heartbeat().error_code,
                 b.heartbeat().error_code, a.heartbeat().error_code, b.heartbeat().error_code]
        described = describe(a_conn, group).groups[0]
        # How many partitions each member holds, and that together they hold all (which topic
        # goes to whom follows the topics' ids, drawn by each broker).
        shares = sorted(sum(len(tp.partitions) for tp in m.assignment.topic_partitions)  # type: ignore[union-attr]
                        for m in described.members)
        return {"codes": codes, "state": described.group_state, "shares": shares,
                "epochs_agree": len({m.member_epoch for m in described.members}) == 1}

    answers = pair.compare(scenario)
    assert answers["shares"] == [3, 3]  # type: ignore[index]


def test_heartbeat_errors(pair: Pair) -> None:
    group, topic = unique("kip848-errors"), unique("kip848-errors-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 1})
        m = Member(c, group, member_id(group), topics=[topic])
        m.heartbeat()
        base = {"group_id": group, "member_id": m.mid, "rebalance_timeout_ms": -1}

        def hb(**fields: object) -> object:
            request = ConsumerGroupHeartbeatRequest(**{**base, **fields})  # type: ignore[arg-type]
            return assignment_by_name(c, c.call(68, HB_V, request))

        return {
            "unknown_member": hb(member_id=member_id("nobody"), member_epoch=1),
            "fenced_epoch": hb(member_epoch=m.epoch + 5),
            "rejoin_without_fields": hb(member_epoch=0),
            "join_without_subscription": hb(member_id=member_id("new"), member_epoch=0, rebalance_timeout_ms=30000,
                                            topic_partitions=[]),
            "join_without_rebalance_timeout": hb(member_id=member_id("new2"), member_epoch=0,
                                                 subscribed_topic_names=[topic], topic_partitions=[]),
            "join_without_owned_partitions": hb(member_id=member_id("new3"), member_epoch=0,
                                                rebalance_timeout_ms=30000, subscribed_topic_names=[topic]),
            "bad_epoch": hb(member_epoch=-3),
            "empty_member_id": hb(member_id="", member_epoch=0, rebalance_timeout_ms=30000,
                                  subscribed_topic_names=[topic], topic_partitions=[]),
            "empty_group": hb(group_id="", member_epoch=0, rebalance_timeout_ms=30000,
                              subscribed_topic_names=[topic], topic_partitions=[]),
            "unknown_assignor": hb(member_id=member_id("new4"), member_epoch=0, rebalance_timeout_ms=30000,
                                   subscribed_topic_names=[topic], topic_partitions=[], server_assignor="nope"),
            "bad_regex": hb(member_id=member_id("new5"), member_epoch=0, rebalance_timeout_ms=30000,
                            subscribed_topic_regex="[", topic_partitions=[]),
            "static_leave_unknown": hb(member_id=member_id("new6"), member_epoch=-2, instance_id="nobody"),
            "described": describe(c, group),
        }

    answers = pair.compare(scenario)
    assert answers["unknown_member"]["error_code"] == 25  # type: ignore[index]
    assert answers["fenced_epoch"]["error_code"] == 110  # type: ignore[index]


def test_leave_with_epoch_minus_one(pair: Pair) -> None:
    group, topic = unique("kip848-leave"), unique("kip848-leave-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 2})
        m = Member(c, group, member_id(group), topics=[topic])
        joined = assignment_by_name(c, m.heartbeat())
        left = assignment_by_name(c, m.heartbeat(epoch=-1))
        after = assignment_by_name(c, m.heartbeat(epoch=joined["member_epoch"]))  # type: ignore[index]
        return [joined, left, after, describe(c, group)]

    answers = pair.compare(scenario)
    assert answers[1]["member_epoch"] == -1  # type: ignore[index]


def test_static_member_leaves_and_rejoins(pair: Pair) -> None:
    group, topic = unique("kip848-static"), unique("kip848-static-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 2})
        m = Member(c, group, member_id(group), topics=[topic], instance="instance-1")
        joined = assignment_by_name(c, m.heartbeat())
        left = assignment_by_name(c, m.heartbeat(epoch=-2))
        described = describe(c, group)
        again = Member(c, group, member_id(group + "again"), topics=[topic], instance="instance-1")
        rejoined = assignment_by_name(c, again.heartbeat())
        duplicate = Member(c, group, member_id(group + "dup"), topics=[topic], instance="instance-1")
        return {"member_ids": [m.mid, again.mid, duplicate.mid], "joined": joined, "left": left,
                "described": described, "rejoined": rejoined,
                "duplicate": assignment_by_name(c, duplicate.heartbeat()), "after": describe(c, group)}

    pair.compare(scenario)


def test_regex_subscription(pair: Pair) -> None:
    group, prefix = unique("kip848-regex"), unique("rx")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {prefix + "-one": 1, prefix + "-two": 2, prefix + "x-other": 1})
        m = Member(c, group, member_id(group), regex=prefix + r"-.*")
        first = assignment_by_name(c, m.heartbeat())
        # Kafka resolves regular expressions in the background: heartbeat until the assignment
        # covers the matching topics, then compare where both ended.

        def owned_now() -> dict[str, list[int]]:
            m.heartbeat()
            names = topic_names(c)
            return {names.get(t.topic_id, "?"): t.partitions for t in m.owned}

        owned = retry(owned_now, lambda held: len(held) == 2)
        return {"first_error": first["error_code"], "owned": owned, "described": describe(c, group)}

    answers = pair.compare(scenario, extra_dropped=frozenset({"group_epoch", "assignment_epoch", "member_epoch"}))
    assert answers["owned"] == {prefix + "-one": [0], prefix + "-two": [0, 1]}  # type: ignore[index]


def test_describe_unknown_and_classic_groups(pair: Pair) -> None:
    classic, unknown = unique("kip848-classic"), unique("kip848-unknown")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        stable_member(c, classic)
        return describe(c, classic, unknown, "")

    pair.compare(scenario)


@pytest.mark.parametrize("version", [9, 10])
def test_offset_commit_with_member_epochs(pair: Pair, version: int) -> None:
    """v9 names the topic, v10 (what a KIP-848 consumer sends) its id."""
    group, topic = unique("kip848-commit"), unique("kip848-commit-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 1})
        topic_id = {name: i for i, name in topic_names(c).items()}[topic]
        m = Member(c, group, member_id(group), topics=[topic])
        m.heartbeat()

        def commit(epoch: int, member: str, version: int = version) -> object:
            return c.call(8, version, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
                topics=[OffsetCommitRequest.Topic(name=topic, topic_id=topic_id, partitions=[
                    OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=7)])]))

        return [commit(m.epoch, m.mid), commit(m.epoch + 1, m.mid), commit(m.epoch - 1, m.mid),
                commit(m.epoch, member_id("stranger")), commit(-1, ""), commit(m.epoch, m.mid, version=8)]

    pair.compare(scenario)


def test_protocols_meet_on_one_group_id(pair: Pair) -> None:
    classic, modern, topic = unique("kip848-meet-classic"), unique("kip848-meet-modern"), unique("kip848-meet-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 1})
        stable_member(c, classic)
        m = Member(c, modern, member_id(modern), topics=[topic])
        joined = assignment_by_name(c, m.heartbeat())
        on_classic = assignment_by_name(c, Member(c, classic, member_id(classic), topics=[topic]).heartbeat())
        from protocol.messages.list_groups import ListGroupsRequest
        from tests.differential.ops import describe as describe_classic

        listed = c.call(16, 5, ListGroupsRequest())
        mine = sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups
                      if g.group_id in (classic, modern))
        return {"joined": joined, "consumer_heartbeat_on_classic_group": on_classic,
                "classic_describe_of_consumer_group": describe_classic(c, modern),
                "listed": mine}

    pair.compare(scenario)


def test_describe_with_authorized_operations(pair: Pair) -> None:
    group, topic = unique("kip848-ops"), unique("kip848-ops-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 1})
        Member(c, group, member_id(group), topics=[topic]).heartbeat()
        return c.call(69, 0, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True))

    pair.compare(scenario, extra_dropped=frozenset({"topic_id"}))


def test_first_epochs_of_new_groups(pair: Pair) -> None:
    topic, missing = unique("kip848-first"), unique("kip848-first-missing")
    empty, absent, subscribed = unique("kip848-empty"), unique("kip848-absent"), unique("kip848-subscribed")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topics(c, {topic: 1})
        nobody = Member(c, empty, member_id(empty), topics=[])
        out = {"empty": assignment_by_name(c, nobody.heartbeat())}
        nobody.topics = [topic]
        out["then_subscribed"] = assignment_by_name(c, nobody.heartbeat(full=True))
        out["missing_topic"] = assignment_by_name(c, Member(c, absent, member_id(absent), topics=[missing]).heartbeat())
        out["subscribed"] = assignment_by_name(c, Member(c, subscribed, member_id(subscribed),
                                                         topics=[topic]).heartbeat())
        out["described"] = describe(c, empty, absent, subscribed)
        return out

    answers = pair.compare(scenario)
    assert answers["subscribed"]["member_epoch"] == 2  # type: ignore[index]


@pytest.mark.parametrize("version", [9, 10])
def test_offset_fetch_with_member_epochs_and_group_deletion(pair: Pair, version: int) -> None:
    group, topic = unique("kip848-fetch"), unique("kip848-fetch-t")

    def scenario(t: Target) -> object:
        from protocol.messages.delete_groups import DeleteGroupsRequest
        from protocol.messages.offset_fetch import OffsetFetchRequest

        c = t.client("consumer")
        create_topics(c, {topic: 1})
        topic_id = {name: i for i, name in topic_names(c).items()}[topic]
        m = Member(c, group, member_id(group), topics=[topic])
        m.heartbeat()

        def fetch(member: str | None, epoch: int) -> object:
            return c.call(9, version, OffsetFetchRequest(groups=[OffsetFetchRequest.Group(
                group_id=group, member_id=member, member_epoch=epoch,
                topics=[OffsetFetchRequest.Group.Topics(name=topic, topic_id=topic_id, partition_indexes=[0])])]))

        out = {"current": fetch(m.mid, m.epoch), "stale": fetch(m.mid, m.epoch - 1),
               "unknown": fetch(member_id("stranger"), m.epoch), "admin": fetch(None, -1),
               "delete_busy": c.call(42, 2, DeleteGroupsRequest(groups_names=[group]))}
        m.heartbeat(epoch=-1)
        out["delete_empty"] = c.call(42, 2, DeleteGroupsRequest(groups_names=[group]))
        out["described"] = describe(c, group)
        return out

    answers = pair.compare(scenario)
    assert answers["delete_busy"]["results"][0]["error_code"] == 68  # type: ignore[index]


def test_classic_member_joins_a_consumer_group(pair: Pair) -> None:
    group, topic = unique("kip848-mixed"), unique("kip848-mixed-t")

    def scenario(t: Target) -> object:
        from protocol.messages.consumer_protocol import ConsumerProtocolSubscription
        from protocol.payloads.consumer_protocol import decode_assignment, encode_subscription
        from tests.differential.ops import heartbeat, join, sync

        c, classic = t.client("consumer"), t.client("classic")
        create_topics(c, {topic: 2})
        m = Member(c, group, member_id(group), topics=[topic])
        first = assignment_by_name(c, m.heartbeat())
        subscription = encode_subscription(ConsumerProtocolSubscription(topics=[topic]), 1)
        required = join(classic, group, "", metadata=subscription)
        joined = join(classic, group, required.member_id, metadata=subscription)
        synced = sync(classic, group, joined.generation_id, joined.member_id)
        assigned = decode_assignment(synced.assignment) if synced.error_code == 0 and synced.assignment else None
        return {"member_ids": [m.mid, required.member_id], "first": first, "required": required,
                "joined": joined, "synced_error": synced.error_code,
                "classic_assignment": None if assigned is None else sorted(
                    (tp.topic, sorted(tp.partitions)) for tp in assigned.assigned_partitions),
                "beat": heartbeat(classic, group, joined.generation_id, joined.member_id),
                "consumer_after": assignment_by_name(c, m.heartbeat()),
                "described": describe(c, group)}

    pair.compare(scenario)


def test_a_classic_group_with_members_is_upgraded_unless_an_assignment_carries_user_data(pair: Pair) -> None:
    """A consumer-protocol member joining a live classic group converts it (Kafka's
    ``convertToConsumerGroup``), except when a member's assignment carries user data from a custom
    assignor, which the consumer protocol would lose: GROUP_ID_NOT_FOUND, and the group stays classic."""
    plain, custom, topic = unique("kip848-up-plain"), unique("kip848-up-custom"), unique("kip848-up-t")

    def scenario(t: Target) -> object:
        from protocol.messages.consumer_protocol import (
            ConsumerProtocolAssignment,
            ConsumerProtocolSubscription,
        )
        from protocol.messages.list_groups import ListGroupsRequest
        from protocol.payloads.consumer_protocol import encode_assignment, encode_subscription

        c, classic = t.client("consumer"), t.client("classic")
        create_topics(c, {topic: 2})
        subscription = encode_subscription(ConsumerProtocolSubscription(topics=[topic]), 1)
        out: dict[str, object] = {}
        for group, user_data in ((plain, None), (custom, b"custom-assignor-state")):
            assignment = encode_assignment(ConsumerProtocolAssignment(
                assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=[0, 1])],
                user_data=user_data), 1)
            stable_member(classic, group, assignment, metadata=subscription)
            answer = Member(c, group, member_id(group), topics=[topic]).heartbeat()
            out[group] = {"message": answer.error_message, "answer": assignment_by_name(c, answer)}
        listed = c.call(16, 5, ListGroupsRequest())
        out["listed"] = sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups
                               if g.group_id in (plain, custom))
        return out

    answers = pair.compare(scenario)
    assert answers[custom]["answer"]["error_code"] == 69  # type: ignore[index]  # GROUP_ID_NOT_FOUND


def test_assignment_batching_holds_a_new_member_until_the_interval_has_passed(pair: Pair) -> None:
    """KIP-1263 (Kafka 4.3+): with the group's consumer.assignment.interval.ms at 10 s, a member
    joining right after the first assignment gets nothing and the group stays Assigning; a
    heartbeat once the interval has passed computes the next assignment and the two converge. The
    reference runs with the broker default 0 (testkit.kafka): the group config overrides it on
    both brokers."""
    from tests.differential.config_ops import GROUP, SET, incremental, settle

    group, one = unique("kip1263"), unique("kip1263-t")

    def scenario(t: Target) -> object:
        a_conn, b_conn = t.client("a"), t.client("b")
        create_topics(a_conn, {one: 6})
        [altered] = incremental(a_conn, GROUP, group, ("consumer.assignment.interval.ms", SET, "10000"))
        settle(t)
        a = Member(a_conn, group, member_id(group + "a"), topics=[one])
        b = Member(b_conn, group, member_id(group + "b"), topics=[one])
        first = assignment_by_name(a_conn, a.heartbeat())
        held_back = assignment_by_name(b_conn, b.heartbeat())
        waiting = describe(a_conn, group).groups[0]
        during = {"state": waiting.group_state, "epochs": (waiting.group_epoch, waiting.assignment_epoch)}
        def split() -> bool:
            return all(len(m.owned) == 1 and len(m.owned[0].partitions) == 3 for m in (a, b))

        # The interval, and a loaded machine's heartbeats.
        retry(lambda: (a.heartbeat(), b.heartbeat()), lambda _answers: split(), timeout=90)
        assert split(), f"{t.name}: no second assignment in 90 s: {a.owned} {b.owned}"
        final = describe(a_conn, group).groups[0]
        return {"altered": altered, "first": first, "held_back": held_back, "during": during,
                "after": {"state": final.group_state, "epochs": (final.group_epoch, final.assignment_epoch)}}

    answers = pair.compare(scenario, together=True)  # mostly waiting out the interval
    assert answers["held_back"]["assignment"] == {}  # type: ignore[index]
    assert answers["during"]["state"] == "Assigning" and answers["after"]["state"] == "Stable"  # type: ignore[index]
