"""Full groups (group.max.size, group.consumer.max.size) against Apache Kafka and kcoord: a broker
pair of their own, both configured with groups of at most two members (the shared brokers keep
Kafka's default, which no test could fill)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.differential.conftest import start_pair, wait_ready
from tests.differential.consumer_ops import Member, assignment_by_name, member_id
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import create_topic, describe, join, join_request, stable_member, sync

pytestmark = pytest.mark.differential

LIMITS = {"group.max.size": "2", "group.consumer.max.size": "2"}


@pytest.fixture(scope="module")
def small_pair(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    reference, ours = start_pair(kafka_libs, tmp_path_factory.mktemp("max-size"), LIMITS)
    try:
        wait_ready(reference.port)
        wait_ready(ours.port)
        yield Pair(Target("kafka", reference.port), Target("kcoord", ours.port))
    finally:
        ours.kill()
        reference.stop()


def test_classic_group_refuses_a_third_member(small_pair: Pair) -> None:
    group = unique("full")

    def scenario(t: Target) -> object:
        a, b, c = t.client("a"), t.client("b"), t.client("c")
        first = stable_member(a, group)
        required = join(b, group, "")
        pending = b.send(11, 9, join_request(group, required.member_id))
        retry(lambda: describe(a, group), lambda d: d.groups[0].group_state == "PreparingRebalance", 10)
        rejoined = join(a, group, first.member_id)
        second = b.recv(11, 9, pending)
        sync(a, group, rejoined.generation_id, rejoined.member_id,
             {rejoined.member_id: b"one", second.member_id: b"two"})
        sync(b, group, second.generation_id, second.member_id)
        third = join(c, group, "")
        third_again = join(c, group, third.member_id) if third.error_code == 79 else None
        return {"member_ids": [first.member_id, second.member_id], "third": third, "third_again": third_again,
                "old_version": join(c, group, "", 3), "described": describe(a, group)}

    answers = small_pair.compare(scenario)
    assert 81 in (answers["third"]["error_code"], (answers["third_again"] or {}).get("error_code"))  # type: ignore[index, union-attr]


def test_consumer_group_refuses_a_third_member(small_pair: Pair) -> None:
    group, topic = unique("full-848"), unique("full-848-t")

    def scenario(t: Target) -> object:
        c = t.client("consumer")
        create_topic(c, topic, 2)
        members = [Member(c, group, member_id(group + str(i)), topics=[topic]) for i in range(3)]
        answers = [assignment_by_name(c, m.heartbeat()) for m in members]
        # Keyed by position: a list of answers that name members would be compared as a set.
        return {"member_ids": [m.mid for m in members], "answers": {
            str(i): {k: v for k, v in a.items() if k != "assignment"}  # type: ignore[attr-defined]
            for i, a in enumerate(answers)}}

    answers = small_pair.compare(scenario)
    assert answers["answers"]["2"]["error_code"] == 81  # type: ignore[index]
