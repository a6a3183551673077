"""What a consumer group subscribes to, in topic ids, and the hash that says when it changed.

Members subscribe by topic name or by regular expression (KIP-848 v1, RE2/J syntax in Kafka: RE2
here too, so an expression means the same and a pathological one cannot stall the coordinator).
The assignor works on topic ids of topics that exist; a topic created later that a member names
or matches, or a partition count that grows, changes the group's metadata hash, which bumps the
group epoch and so computes a new target assignment (Kafka 4.1, KIP-1101).

What an expression subscribes to is what the group recorded it resolved to (its
ConsumerGroupRegularExpression record), not a match against the topics of the moment: the
resolution leaves out the topics the member that triggered it may not Describe (Kafka 4.0,
KAFKA-18813), which a live match could not know, and replay rebuilds it from the record.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

import re2

from broker.coordinators.group.core.base.context import TopicView
from broker.coordinators.group.core.consumer.assignor_api import TopicId
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad expression is answered, not logged by the engine


class InvalidRegularExpression(ValueError):
    pass


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """The compiled expression; InvalidRegularExpression when RE2 refuses it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise InvalidRegularExpression(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                                       f"{exc}.") from None


def matching_topics(pattern: str, topics: TopicView) -> frozenset[str]:
    """Topic names the expression matches in full, as Java's ``Matcher.matches``."""
    regex = compile_regex(pattern)
    return frozenset(name for name in topics.topic_names() if regex.fullmatch(name) is not None)


def describable_matches(pattern: str, topics: TopicView,
                        may_describe: Callable[[str], bool] | None) -> frozenset[str]:
    """The topics the expression matches that the principal may Describe (all of them when
    ``may_describe`` is None: no authorizer)."""
    matched = matching_topics(pattern, topics)
    if may_describe is None:
        return matched
    return frozenset(name for name in matched if may_describe(name))


def member_topic_names(member: ConsumerGroupMember, resolved: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """The topic names a member subscribes to: those it names, and what its expression resolved to
    in ``resolved`` (the group's recorded resolutions, as they stand after the change being made)."""
    regex = member.subscribed_topic_regex
    if not regex:
        return member.subscribed_topic_names
    return member.subscribed_topic_names | resolved.get(regex, frozenset())


def resolve(names: Iterable[str], topics: TopicView) -> frozenset[TopicId]:
    """Ids of the named topics that exist."""
    out = set()
    for name in names:
        topic_id = topics.topic_id(name)
        if topic_id is not None:
            out.add(topic_id)
    return frozenset(out)


def metadata_hash(names: Iterable[str], topics: TopicView) -> int:
    """A signed 64-bit hash of each subscribed topic's name, id and partition count (0 for no
    topic). Kafka 4.1 stores its own hash of the same facts; a broker that computes it differently
    only sees a change once and recomputes the assignment."""
    digest = hashlib.blake2b(digest_size=8)
    seen = False
    for name in sorted(names):
        topic_id = topics.topic_id(name)
        count = topics.partition_count(name)
        if topic_id is None or count is None:
            continue
        seen = True
        digest.update(name.encode())
        digest.update(topic_id)
        digest.update(struct.pack(">i", count))
    if not seen:
        return 0
    return int.from_bytes(digest.digest(), "big", signed=True)

