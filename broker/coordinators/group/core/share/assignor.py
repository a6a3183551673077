"""The share groups' server-side assignor ("simple", as Kafka names it): every subscribed
partition goes to at least one member, and a partition may go to several members when a topic has
fewer partitions than subscribers (they then share its records)."""

from __future__ import annotations

from collections.abc import Mapping

from broker.coordinators.group.core.share.group import Assignment, TopicId

NAME = "simple"


def assign(subscriptions: Mapping[str, frozenset[str]],
           partitions: Mapping[str, tuple[TopicId, frozenset[int]]]) -> dict[str, Assignment]:
    """``subscriptions``: member id -> topic names; ``partitions``: topic name -> (id, the
    partitions that may be assigned: those whose share state is initialized). Members and
    partitions are taken in a fixed order, so the same input always gives the same assignment."""
    out: dict[str, dict[TopicId, set[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        topic_id, assignable = partitions[topic]
        indexes = sorted(assignable)
        members = sorted(m for m, names in subscriptions.items() if topic in names)
        if not members or not indexes:
            continue
        if len(members) <= len(indexes):
            for i, p in enumerate(indexes):
                out[members[i % len(members)]].setdefault(topic_id, set()).add(p)
        else:
            for i, m in enumerate(members):
                out[m].setdefault(topic_id, set()).add(indexes[i % len(indexes)])
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}
