"""One reconciliation step of a consumer-group member towards its target assignment (Kafka's
``CurrentAssignmentBuilder``), and the check of the member epoch a heartbeat carries.

The coordinator never gives a partition to a member while another member may still own it. Each
partition owned by a member is recorded with that member's epoch (``owner_epoch``, -1 when no
member owns it); a member gives a partition up by leaving it out of the partitions it reports in
its heartbeat. A step is computed from the member as stored, the target assignment and its epoch,
``owner_epoch`` and what the member reported owning (``owned``; None when the heartbeat did not
carry the field, which counts as "still owns everything").

Rules of :func:`reconcile`, by the member's state:

STABLE
    * member epoch != target epoch: compute the next assignment at the member's epoch (below).
    * same epoch and the subscription changed in this heartbeat: drop from the assignment the
      topics the member no longer subscribes to (below, "subscription consistency").
    * otherwise: unchanged.
UNREVOKED_PARTITIONS
    * the member still reports one of its partitions pending revocation (or reported nothing):
      unchanged, or after a subscription change, subscription consistency only.
    * it has revoked them all: compute the next assignment at epoch
      ``min(member epoch + 1, target epoch)``. The +1 moves a member one epoch per completed
      revocation; the min keeps it from running ahead of a target that is not computed yet (it
      entered the state through a subscription change at the target epoch).
UNRELEASED_PARTITIONS
    * compute the next assignment at the member's epoch: it picks up the partitions released
      since.
UNKNOWN (written by a newer coordinator)
    * the member reports owning anything, or did not report: FENCED_MEMBER_EPOCH, it must drop
      everything and rejoin; reporting nothing owned: compute the next assignment at the target
      epoch.

Computing the next assignment at epoch E, per topic (a topic the member no longer subscribes to
counts as having no target partitions):
    kept      = assigned ∩ target
    revoking  = assigned - kept
    to assign = target - kept, minus the partitions another member still owns (``owner_epoch``
                is not -1 and the partition is not one of this member's own partitions pending
                revocation, which it has just been seen to give up): those are *unreleased*.
Then, the first that applies:
    1. something to revoke that the member still reports owning: UNREVOKED_PARTITIONS at epoch
       E, assigned = kept, pending revocation = revoking. It gets nothing new until it revokes.
    2. something to assign: epoch = target epoch, assigned = kept + to assign, nothing pending,
       UNRELEASED_PARTITIONS if some partitions are unreleased, else STABLE.
    3. only unreleased partitions: UNRELEASED_PARTITIONS at the target epoch, assigned = kept.
    4. otherwise STABLE at the target epoch with assigned = kept.
Whenever the epoch is set, even to the same value, the epoch left becomes the previous epoch.

Subscription consistency (KAFKA-19431): with a new subscription, the assigned partitions of
topics no longer subscribed move to pending revocation at once, without waiting for a new target.
If the member subscribes to nothing and has nothing pending, everything assigned is pending. If
the member still reports owning any pending partition it is UNREVOKED_PARTITIONS at the same
epoch (previous epoch untouched); otherwise they are just dropped from the assignment.

The previous-epoch leniency (:func:`validate_member_epoch`): a heartbeat with an epoch above the
member's is fenced; one below it is accepted only when it is the member's previous epoch and every
partition it reports owning is in its assigned partitions: the response that moved it to the new
epoch was lost, and owning a subset of what it now has cannot conflict with anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace

from broker.coordinators.group.core.consumer.assignor_api import Assignment, TopicId
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember, MemberState

OwnerEpoch = Callable[[TopicId, int], int]
Owned = Mapping[TopicId, Collection[int]]  # the heartbeat's TopicPartitions, one entry per topic

_NONE: frozenset[int] = frozenset()


class FencedMemberEpochError(Exception):
    """FENCED_MEMBER_EPOCH: the member must give up all its partitions and rejoin with epoch 0."""


def validate_member_epoch(member: ConsumerGroupMember, received_epoch: int, owned: Owned | None) -> None:
    """Kafka's check of the epoch a heartbeat of an existing member carries. Kafka makes it for
    epoch 0 as well: an existing member rejoining with 0 passes only if 0 is its previous epoch."""
    if received_epoch > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({received_epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )
    if received_epoch < member.member_epoch and (
        received_epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions)
    ):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({received_epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Mapping[TopicId, frozenset[int]],
    owner_epoch: OwnerEpoch,
    owned: Owned | None,
    *,
    subscribed_topics: Collection[TopicId] | None = None,
    subscription_changed: bool = False,
) -> ConsumerGroupMember:
    """The member after one reconciliation step (the same object when nothing changes).

    ``subscribed_topics`` is the member's subscription resolved to topic ids (an unresolved
    regular expression matching nothing); None leaves every topic counted as subscribed.
    ``subscription_changed`` says the heartbeat being handled changed the subscription.
    Raises :class:`FencedMemberEpochError` for a member in the UNKNOWN state that owns anything.
    """
    step = _Step(member, target_epoch, target, owner_epoch, owned, subscribed_topics)
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next_assignment(member.member_epoch)
        if subscription_changed:
            return step.drop_unsubscribed()
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return step.drop_unsubscribed() if subscription_changed else member
        return step.next_assignment(min(member.member_epoch + 1, target_epoch))
    if state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member.member_epoch)
    # UNKNOWN: only a member that provably owns nothing can be reconciled from scratch.
    if owned is None or len(owned) > 0:
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin."
        )
    return step.next_assignment(target_epoch)


class _Step:
    __slots__ = ("member", "owned", "owner_epoch", "subscribed", "target", "target_epoch")

    def __init__(
        self,
        member: ConsumerGroupMember,
        target_epoch: int,
        target: Mapping[TopicId, frozenset[int]],
        owner_epoch: OwnerEpoch,
        owned: Owned | None,
        subscribed: Collection[TopicId] | None,
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.owner_epoch = owner_epoch
        self.owned = owned
        self.subscribed = subscribed

    def _is_subscribed(self, topic: TopicId) -> bool:
        return self.subscribed is None or topic in self.subscribed

    def next_assignment(self, member_epoch: int) -> ConsumerGroupMember:
        member = self.member
        assigned = member.assigned_partitions
        own_pending = member.partitions_pending_revocation
        new_assigned: Assignment = {}
        revoking: Assignment = {}
        to_assign: Assignment = {}
        has_unreleased = False
        for topic in self.target.keys() | assigned.keys():
            target = self.target.get(topic, _NONE) if self._is_subscribed(topic) else _NONE
            current = assigned.get(topic, _NONE)
            kept = current & target
            candidates = target - kept
            unreleased = frozenset(
                p
                for p in candidates
                if self.owner_epoch(topic, p) != -1 and p not in own_pending.get(topic, _NONE)
            )
            has_unreleased = has_unreleased or bool(unreleased)
            if kept:
                new_assigned[topic] = kept
            if current - kept:
                revoking[topic] = current - kept
            if candidates - unreleased:
                to_assign[topic] = candidates - unreleased

        previous = member.member_epoch
        if revoking and _owns_any(self.owned, revoking):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                member_epoch=member_epoch,
                previous_member_epoch=previous,
                assigned_partitions=new_assigned,
                partitions_pending_revocation=revoking,
            )
        if to_assign:
            for topic, parts in to_assign.items():
                new_assigned[topic] = new_assigned.get(topic, _NONE) | parts
        state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        return replace(
            member,
            state=state,
            member_epoch=self.target_epoch,
            previous_member_epoch=previous,
            assigned_partitions=new_assigned,
            partitions_pending_revocation={},
        )

    def drop_unsubscribed(self) -> ConsumerGroupMember:
        member = self.member
        if self.subscribed is None:
            return member
        assigned = member.assigned_partitions
        if not self.subscribed and not member.partitions_pending_revocation:
            new_assigned: Assignment = {}
            pending: Assignment = dict(assigned)
        else:
            new_assigned = {t: p for t, p in assigned.items() if t in self.subscribed}
            pending = dict(member.partitions_pending_revocation)
            for topic, parts in assigned.items():
                if topic not in self.subscribed:
                    pending[topic] = pending.get(topic, _NONE) | parts
        if new_assigned == assigned:
            return member
        if pending and _owns_any(self.owned, pending):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned_partitions=new_assigned,
                partitions_pending_revocation=pending,
            )
        # Already revoked by the client: only the assignment shrinks, the state stays.
        return replace(member, assigned_partitions=new_assigned)


def _owns_any(owned: Owned | None, partitions: Mapping[TopicId, frozenset[int]]) -> bool:
    """Whether the member reports owning one of ``partitions``; not reporting counts as owning."""
    if owned is None:
        return True
    for topic, parts in owned.items():
        pending = partitions.get(topic)
        if pending and not pending.isdisjoint(parts):
            return True
    return False


def _is_subset(owned: Owned | None, assigned: Mapping[TopicId, frozenset[int]]) -> bool:
    if owned is None:
        return False
    for topic, parts in owned.items():
        mine = assigned.get(topic)
        # A topic the member has nothing of fails even when it lists no partition of it.
        if mine is None or not mine.issuperset(parts):
            return False
    return True
