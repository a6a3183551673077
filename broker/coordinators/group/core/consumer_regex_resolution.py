"""The refresh of a consumer group's regular expressions, when its timer fires (when it is asked
for: ``regex_refresh``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.consumer import records as rec
from broker.coordinators.group.core.consumer.subscriptions import (
    describable_matches,
    member_topic_names,
    metadata_hash,
)
from broker.coordinators.group.core.consumer_heartbeat import group_state, note_transition
from protocol.group_events import PARTITIONS_CHANGED

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState


def on_timer(st: CoordinatorState, group_id: str, now: int) -> Result:
    """The refresh: every expression the group subscribes with resolved against the topics as they
    are now, with the Describe filter of the member that asked, written (each with ``now`` as its
    time, changed or not, as Kafka writes them); the group epoch bumped when a resolution or the
    group's metadata hash changed."""
    may_describe = st.regex_refreshes.pop(group_id, None)
    out = Result()
    group = st.consumer_groups.get(group_id)
    if group is None:
        return out
    topics = st.topics
    resolved = dict(group.resolved_regexes)
    records: list[rec.ConsumerGroupRecord] = []
    changed = False
    for regex in sorted(group.subscribed_regexes()):
        matched = describable_matches(regex, topics, may_describe)
        changed = changed or resolved.get(regex) != matched
        resolved[regex] = matched
        records.append(rec.regular_expression(group_id, regex, matched, topics.version, now))
    if not records:
        return out
    names = {name for m in group.members.values() for name in member_topic_names(m, resolved)}
    new_hash = metadata_hash(names, topics)
    bumped = changed or new_hash != group.metadata_hash
    if bumped:
        records.append(rec.group_epoch(group_id, group.group_epoch + 1, new_hash))
    before = group_state(st, group_id)
    for record in records:
        st.emit(out, record)
    group.regex_topics_version = topics.version
    group.topics_version = topics.version  # the metadata hash was checked against them just now
    if bumped:
        st.journal.note(group_id, PARTITIONS_CHANGED, None, why="subscribed regular expressions resolved anew")
        note_transition(st, out, group_id, before, "topics matched by the subscribed regular expressions changed")
    return out
