"""Moving a streams member one step towards its target tasks (Kafka's streams
``CurrentAssignmentBuilder``): tasks it must give up are revoked first, the member staying at its
epoch until it reports they are gone; only then does it get the target's epoch and the new tasks,
except active tasks another member still holds, which it gets once they are released."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from broker.coordinators.group.core.streams.model import MemberState, StreamsMember, TaskAssignment, Tasks


class FencedMemberEpochError(Exception):
    pass


def _minus(a: Tasks, b: Tasks) -> Tasks:
    out = {s: p - b.get(s, frozenset()) for s, p in a.items()}
    return {s: p for s, p in out.items() if p}


def _and(a: Tasks, b: Tasks) -> Tasks:
    out = {s: p & b.get(s, frozenset()) for s, p in a.items()}
    return {s: p for s, p in out.items() if p}


def _subset(a: Tasks, b: Tasks) -> bool:
    return all(p <= b.get(s, frozenset()) for s, p in a.items())


def _disjoint(a: Tasks, b: Tasks) -> bool:
    return all(not (p & b.get(s, frozenset())) for s, p in a.items())


def validate_epoch(member: StreamsMember, received: int, owned: TaskAssignment | None) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid: the current epoch, or the previous one when
    the member's answer to the last bump was lost and it owns nothing it should not."""
    if received > member.member_epoch:
        raise FencedMemberEpochError(f"The streams group member has a greater member epoch ({received}) "
                                     f"than the one known by the group coordinator ({member.member_epoch}). "
                                     "The member must abandon all its tasks and rejoin.")
    if received < member.member_epoch:
        if received == member.previous_member_epoch and owned is not None and (
                _subset(owned.active, member.assigned.active) and _subset(owned.standby, member.assigned.standby)
                and _subset(owned.warmup, member.assigned.warmup)):
            return
        raise FencedMemberEpochError(f"The streams group member has a smaller member epoch ({received}) "
                                     f"than the one known by the group coordinator ({member.member_epoch}). "
                                     "The member must abandon all its tasks and rejoin.")


def reconcile(member: StreamsMember, target_epoch: int, target: TaskAssignment,
              active_owners: Mapping[tuple[str, int], str], owned: TaskAssignment | None) -> StreamsMember:
    if member.state is MemberState.UNREVOKED_TASKS:
        pending = member.pending_revocation
        if owned is None or not (_disjoint(owned.active, pending.active) and _disjoint(owned.standby, pending.standby)
                                 and _disjoint(owned.warmup, pending.warmup)):
            return member  # still revoking
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    current = member.assigned
    revoke = TaskAssignment(_minus(current.active, target.active), _minus(current.standby, target.standby),
                            _minus(current.warmup, target.warmup))
    if not revoke.is_empty():
        return replace(member, state=MemberState.UNREVOKED_TASKS, previous_member_epoch=member.member_epoch,
                       assigned=TaskAssignment(_and(current.active, target.active),
                                               _and(current.standby, target.standby),
                                               _and(current.warmup, target.warmup)),
                       pending_revocation=revoke)
    unreleased: dict[str, set[int]] = {}
    for s, parts in target.active.items():
        for p in parts:
            holder = active_owners.get((s, p))
            if holder is not None and holder != member.member_id:
                unreleased.setdefault(s, set()).add(p)
    held = {s: frozenset(p) for s, p in unreleased.items()}
    return replace(member, state=MemberState.UNRELEASED_TASKS if held else MemberState.STABLE,
                   previous_member_epoch=member.member_epoch if member.member_epoch != target_epoch
                   else member.previous_member_epoch,
                   member_epoch=target_epoch,
                   assigned=TaskAssignment(_minus(target.active, held), target.standby, target.warmup),
                   pending_revocation=TaskAssignment())
