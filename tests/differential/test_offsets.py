"""Committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) against Apache Kafka and kcoord, in
the versions clients send (v10 naming topics by id included): answers compared field by field."""

from __future__ import annotations

import uuid

import pytest

from kclient.wire_client import WireClient
from protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.payloads.consumer_protocol import encode_subscription
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import (
    create_topic,
    describe,
    heartbeat,
    join,
    join_member,
    join_request,
    leave,
    stable_member,
    sync,
)

pytestmark = pytest.mark.differential

P = OffsetCommitRequest.Topic.Partition


def commit(c: WireClient, group: str, offsets: dict[str, list[P]], *, generation: int = -1, member: str = "",
           instance: str | None = None, version: int = 9) -> OffsetCommitResponse:
    return c.call(8, version, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, group_instance_id=instance,
        topics=[OffsetCommitRequest.Topic(name=t, partitions=ps) for t, ps in offsets.items()]))


def fetch(c: WireClient, group: str, topics: dict[str, list[int]] | None, version: int = 7,
          require_stable: bool = False) -> OffsetFetchResponse:
    requested = None if topics is None else [OffsetFetchRequest.Topic(name=t, partition_indexes=ps)
                                             for t, ps in topics.items()]
    return c.call(9, version, OffsetFetchRequest(group_id=group, topics=requested, require_stable=require_stable))


def fetch_groups(c: WireClient, groups: dict[str, dict[str, list[int]] | None], version: int = 8) -> OffsetFetchResponse:
    return c.call(9, version, OffsetFetchRequest(groups=[
        OffsetFetchRequest.Group(group_id=g, topics=None if ts is None else [
            OffsetFetchRequest.Group.Topics(name=t, partition_indexes=ps) for t, ps in ts.items()])
        for g, ts in groups.items()]))


def sorted_topics(answer: OffsetFetchResponse | OffsetCommitResponse) -> OffsetFetchResponse | OffsetCommitResponse:
    """Topics of an all-topics fetch come from a hash map: sorted by name for comparison."""
    answer.topics.sort(key=lambda t: t.name)
    for t in answer.topics:
        t.partitions.sort(key=lambda p: p.partition_index)
    return answer


@pytest.mark.parametrize(("commit_version", "fetch_version"), [(2, 1), (2, 3), (5, 5), (7, 7), (8, 7), (9, 7)])
def test_standalone_commit_and_fetch(pair: Pair, commit_version: int, fetch_version: int) -> None:
    group, topic = unique("offsets"), unique("offsets-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 3)
        committed = commit(c, group, {topic: [P(partition_index=0, committed_offset=10, committed_leader_epoch=0,
                                                committed_metadata="first"),
                                              P(partition_index=2, committed_offset=0, committed_metadata=None)]},
                           version=commit_version)
        return [committed, fetch(c, group, {topic: [0, 1, 2]}, fetch_version),
                sorted_topics(fetch(c, group, None, max(fetch_version, 2)))]

    answers = pair.compare(scenario)
    assert answers[1]["topics"][0]["partitions"][0]["committed_offset"] == 10  # type: ignore[index]


def test_commit_metadata_size_limit(pair: Pair) -> None:
    group, topic = unique("metadata"), unique("metadata-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        committed = commit(c, group, {topic: [P(partition_index=0, committed_offset=1, committed_metadata="x" * 4096),
                                              P(partition_index=1, committed_offset=2, committed_metadata="y" * 4097)]})
        return [committed, fetch(c, group, {topic: [0, 1]})]

    answers = pair.compare(scenario)
    codes = [p["error_code"] for p in answers[0]["topics"][0]["partitions"]]  # type: ignore[index]
    assert codes == [0, 12]


def test_commit_to_unknown_topic_and_partition(pair: Pair) -> None:
    group, topic, missing = unique("unknown-tp"), unique("unknown-tp-topic"), unique("no-such-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        committed = commit(c, group, {topic: [P(partition_index=0, committed_offset=5),
                                              P(partition_index=7, committed_offset=5)],
                                      missing: [P(partition_index=0, committed_offset=5)]})
        return [committed, fetch(c, group, {topic: [0, 7], missing: [0]}), sorted_topics(fetch(c, group, None))]

    pair.compare(scenario)


def test_commit_generation_and_member_checks(pair: Pair) -> None:
    group, topic = unique("generation"), unique("generation-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        joined = stable_member(c, group)
        g, m = joined.generation_id, joined.member_id
        one = {topic: [P(partition_index=0, committed_offset=3)]}
        return [
            commit(c, group, one, generation=g, member=m),
            commit(c, group, one, generation=g + 1, member=m),
            commit(c, group, one, generation=g, member="unknown"),
            commit(c, group, one, generation=-1, member=""),
            commit(c, group, one, generation=-1, member=m),
            commit(c, group, one, generation=g, member=m, version=2),
            commit(c, group, one, generation=g + 1, member=m, version=5),
            commit(c, group, one, generation=g, member=m, instance="not-mine", version=8),
            fetch(c, group, {topic: [0]}),
        ]

    pair.compare(scenario)


def test_commit_during_rebalance_and_by_a_static_member(pair: Pair) -> None:
    group, topic = unique("rebalance-commit"), unique("rebalance-commit-topic")

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        create_topic(a, topic, 1)
        joined = stable_member(a, group, instance="static-a")
        one = {topic: [P(partition_index=0, committed_offset=3)]}
        committed = commit(a, group, one, generation=joined.generation_id, member=joined.member_id,
                           instance="static-a")
        wrong = commit(a, group, one, generation=joined.generation_id, member="someone", instance="static-a")
        # A second static member with a different instance id: its JoinGroup starts a rebalance.
        pending = b.send(11, 9, join_request(group, "", instance="static-b"))
        retry(lambda: describe(a, group), lambda d: d.groups[0].group_state == "PreparingRebalance", 10)
        during = commit(a, group, one, generation=joined.generation_id, member=joined.member_id,
                        instance="static-a")
        rejoined = join(a, group, joined.member_id, instance="static-a")
        second = b.recv(11, 9, pending)
        return {"member_ids": [joined.member_id, second.member_id],
                "committed": committed, "wrong": wrong, "during": during,
                "rejoined": rejoined, "second": second}

    answers = pair.compare(scenario)
    # A member may commit while the group prepares a rebalance (only CompletingRebalance refuses).
    assert answers["during"]["topics"][0]["partitions"][0]["error_code"] == 0  # type: ignore[index]


def test_offset_fetch_batch_of_groups(pair: Pair) -> None:
    first, second, unknown, topic = unique("batch-a"), unique("batch-b"), unique("batch-c"), unique("batch-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        commit(c, first, {topic: [P(partition_index=0, committed_offset=1, committed_metadata="a")]})
        commit(c, second, {topic: [P(partition_index=1, committed_offset=2, committed_metadata="b")]})
        answer = fetch_groups(c, {first: {topic: [0, 1]}, second: None, unknown: {topic: [0]}})
        for group in answer.groups:
            group.topics.sort(key=lambda x: x.name)
        return [answer, fetch_groups(c, {first: None}, version=9)]

    pair.compare(scenario)


def test_offset_fetch_require_stable_and_old_versions(pair: Pair) -> None:
    group, topic = unique("stable"), unique("stable-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        commit(c, group, {topic: [P(partition_index=0, committed_offset=42)]})
        return [fetch(c, group, {topic: [0]}, 7, require_stable=True), fetch(c, group, {topic: [0]}, 1),
                fetch(c, unique("nothing"), {topic: [0]}, 5), fetch(c, "", {topic: [0]}, 7)]

    pair.compare(scenario)


def test_offset_delete(pair: Pair) -> None:
    group, topic, other, missing = unique("delete"), unique("delete-topic"), unique("delete-other"), unique("missing")
    no_group = unique("no-group")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        create_topic(c, other, 1)
        subscription = encode_subscription(ConsumerProtocolSubscription(topics=[topic]), 1)
        joined = join_member(c, group, metadata=subscription)
        sync(c, group, joined.generation_id, joined.member_id, {joined.member_id: b""})
        commit(c, group, {topic: [P(partition_index=0, committed_offset=1), P(partition_index=1, committed_offset=1)],
                          other: [P(partition_index=0, committed_offset=1)]},
               generation=joined.generation_id, member=joined.member_id)

        def delete(group_id: str, targets: dict[str, list[int]]) -> object:
            return c.call(47, 0, OffsetDeleteRequest(group_id=group_id, topics=[
                OffsetDeleteRequest.Topic(name=n, partitions=[OffsetDeleteRequest.Topic.Partition(partition_index=p)
                                                              for p in ps]) for n, ps in targets.items()]))

        answers = [delete(group, {topic: [0]}), delete(group, {other: [0]}),
                   delete(group, {missing: [0]}), delete(no_group, {topic: [0]}),
                   delete(no_group, {missing: [0]})]
        leave(c, group, (joined.member_id, None))
        answers += [delete(group, {topic: [0, 1, 5]}), fetch(c, group, None), delete("", {topic: [0]})]
        return answers

    answers = pair.compare(scenario)
    assert answers[0]["topics"][0]["partitions"][0]["error_code"] == 86  # type: ignore[index]


def test_commit_to_the_empty_group_id(pair: Pair) -> None:
    topic = unique("empty-group-topic")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        return [commit(c, "", {topic: [P(partition_index=0, committed_offset=9)]}, version=2),
                fetch(c, "", {topic: [0]}, 1), fetch(c, "", {topic: [0]}, 7)]

    pair.compare(scenario)


def test_commit_and_heartbeat_while_the_group_awaits_its_assignment(pair: Pair) -> None:
    group, topic = unique("completing"), unique("completing-topic")

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        create_topic(a, topic, 1)
        first = stable_member(a, group)
        required = join(b, group, "")
        pending = b.send(11, 9, join_request(group, required.member_id))
        retry(lambda: describe(a, group), lambda d: d.groups[0].group_state == "PreparingRebalance", 10)
        rejoined = join(a, group, first.member_id)
        second = b.recv(11, 9, pending)
        one = {topic: [P(partition_index=0, committed_offset=4)]}
        # Both joined, no SyncGroup yet: the group waits for the leader's assignment.
        return {"member_ids": [first.member_id, second.member_id],
                "state": describe(a, group).groups[0].group_state,
                "commit": commit(a, group, one, generation=rejoined.generation_id, member=rejoined.member_id),
                "old_generation_commit": commit(a, group, one, generation=first.generation_id,
                                                member=first.member_id),
                "heartbeat": heartbeat(a, group, rejoined.generation_id, rejoined.member_id)}

    answers = pair.compare(scenario)
    assert answers["commit"]["topics"][0]["partitions"][0]["error_code"] == 27  # type: ignore[index]


# ---- v10: topics named by id -------------------------------------------------------------------

def labelled(answer: OffsetCommitResponse | OffsetFetchResponse, labels: dict[bytes, str]) -> object:
    """A v10 answer with each topic's id replaced by what the scenario calls it (v10 carries no
    names, and each broker draws its own ids), topics sorted by it."""
    topic_lists = [g.topics for g in answer.groups] if isinstance(answer, OffsetFetchResponse) else [answer.topics]
    for topics in topic_lists:
        for topic in topics:
            topic.name, topic.topic_id = labels.get(topic.topic_id, "an id nobody knows"), bytes(16)
        topics.sort(key=lambda x: x.name)
    return answer


def test_commit_and_fetch_by_topic_id(pair: Pair) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id: offsets committed by id read back by
    name and the other way round; an id no topic has (and the zero id) answers UNKNOWN_TOPIC_ID
    per partition, after the group's other topics; a partition the topic lacks is
    UNKNOWN_TOPIC_OR_PARTITION; asking for every topic answers each by its id."""
    group, by_name_group, topic = unique("by-id"), unique("by-name"), unique("by-id-topic")
    no_group, absent = unique("no-such-group"), uuid.uuid4().bytes

    def scenario(t: Target) -> object:
        c = t.client()
        topic_id = create_topic(c, topic, 3).topics[0].topic_id
        labels = {topic_id: "the topic", absent: "an id nobody knows", bytes(16): "the zero id"}
        T, G = OffsetCommitRequest.Topic, OffsetFetchRequest.Group
        committed = c.call(8, 10, OffsetCommitRequest(group_id=group, topics=[
            T(topic_id=topic_id, partitions=[P(partition_index=0, committed_offset=10, committed_leader_epoch=0,
                                               committed_metadata="first"),
                                             P(partition_index=2, committed_offset=0, committed_metadata=None),
                                             P(partition_index=7, committed_offset=1, committed_metadata="")]),
            T(topic_id=absent, partitions=[P(partition_index=0, committed_offset=5, committed_metadata="")]),
            T(topic_id=bytes(16), partitions=[P(partition_index=0, committed_offset=5, committed_metadata="")])]))
        only_unknown = c.call(8, 10, OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=3,
                                                         member_id="nobody", topics=[
            T(topic_id=absent, partitions=[P(partition_index=0, committed_offset=5, committed_metadata="")])]))
        commit(c, by_name_group, {topic: [P(partition_index=1, committed_offset=4, committed_metadata="by name")]})
        fetched = c.call(9, 10, OffsetFetchRequest(groups=[
            G(group_id=group, topics=[G.Topics(topic_id=absent, partition_indexes=[0, 1]),
                                      G.Topics(topic_id=topic_id, partition_indexes=[0, 1, 2, 9])]),
            G(group_id=by_name_group, topics=None),
            G(group_id=no_group, topics=[G.Topics(topic_id=absent, partition_indexes=[3])])]))
        every = c.call(9, 10, OffsetFetchRequest(groups=[G(group_id=group, topics=None)]))
        return [labelled(committed, labels), labelled(only_unknown, labels), labelled(fetched, labels),
                labelled(every, labels), fetch_groups(c, {group: {topic: [0, 2]}}, version=9)]

    answers = pair.compare(scenario)
    committed = answers[0]["topics"]  # type: ignore[index]
    assert [(t["name"], [p["error_code"] for p in t["partitions"]]) for t in committed] == [
        ("an id nobody knows", [100]), ("the topic", [0, 0, 3]), ("the zero id", [100])]
    read_back = answers[2]["groups"][0]["topics"]  # type: ignore[index]
    assert [p["committed_offset"] for t in read_back for p in t["partitions"]] == [-1, -1, 10, -1, 0, -1]
