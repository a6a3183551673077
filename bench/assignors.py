"""Time of one target assignment for a large group, per server-side assignor.

    python -m bench.assignors [--members 1000] [--topics 100] [--partitions 10]

Every member subscribes to every topic. Printed per assignor: the first assignment (nobody holds
anything), a re-run on its own result (nothing changes), and the run after one member joins.
Uniform also gets a group with different subscriptions (each member reads half the topics), which
takes its other algorithm.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from broker.coordinators.group.core.consumer.assignor_api import (
    Assignment,
    Assignor,
    GroupSpec,
    MemberSpec,
    TopicId,
)
from broker.coordinators.group.core.consumer.assignors import ASSIGNORS


class Topics:
    def __init__(self, counts: dict[TopicId, int]) -> None:
        self.counts = counts

    def partition_count(self, topic: TopicId) -> int:
        return self.counts.get(topic, -1)

    def racks_for_partition(self, topic: TopicId, partition: int) -> frozenset[str]:
        return frozenset()


def regroup(group: GroupSpec, current: dict[str, Assignment]) -> GroupSpec:
    return GroupSpec({
        m: MemberSpec(s.subscribed_topics, None, None, current.get(m, {})) for m, s in group.members.items()
    })


def timed(label: str, run: Callable[[], dict[str, Assignment]]) -> dict[str, Assignment]:
    start = time.perf_counter()
    result = run()
    print(f"  {label:<34} {(time.perf_counter() - start) * 1000:9.1f} ms")
    return result


def scenario(assignor: Assignor, group: GroupSpec, topics: Topics) -> None:
    first = timed("first assignment", lambda: assignor.assign(group, topics))
    settled = regroup(group, first)
    timed("re-run, nothing changed", lambda: assignor.assign(settled, topics))
    some_subscription = next(iter(group.members.values())).subscribed_topics
    joined = GroupSpec({**settled.members, "joiner": MemberSpec(some_subscription, None, None, {})})
    timed("one member joins", lambda: assignor.assign(joined, topics))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=10)
    args = ap.parse_args()

    topic_ids = [n.to_bytes(16, "big") for n in range(1, args.topics + 1)]
    topics = Topics(dict.fromkeys(topic_ids, args.partitions))
    everything = frozenset(topic_ids)
    same = GroupSpec({f"member-{i:05d}": MemberSpec(everything, None, None, {}) for i in range(args.members)})
    halves = (frozenset(topic_ids[: args.topics // 2]), frozenset(topic_ids[args.topics // 4:]))
    different = GroupSpec({
        f"member-{i:05d}": MemberSpec(halves[i % 2], None, None, {}) for i in range(args.members)
    })

    print(f"{args.members} members x {args.topics} topics x {args.partitions} partitions")
    for name, assignor in ASSIGNORS.items():
        print(f"{name}, same subscriptions:")
        scenario(assignor, same, topics)
    print("uniform, different subscriptions:")
    scenario(ASSIGNORS["uniform"], different, topics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
