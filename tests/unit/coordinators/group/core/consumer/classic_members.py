"""A classic consumer member over the in-memory harness (eager or cooperative) and the checks of
groups mixing both protocols."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.payloads.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tests.unit.coordinators.group.core.harness import Harness

ALL = {("t", p) for p in range(4)}


def assignment_bytes(partitions: set[tuple[str, int]]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return encode_assignment(ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()]), 1)


class ClassicMember:
    """A classic consumer client. Eager: it gives up everything before it rejoins. Cooperative: it
    rejoins still owning its partitions (listed in its subscription) and gives up only what an
    assignment takes away, then rejoins. As a classic group's leader it assigns round-robin."""

    def __init__(self, h: Harness, group: str = "g", instance_id: str | None = None,
                 cooperative: bool = False, session: int = 10_000, rebalance: int = 30_000) -> None:
        self.h, self.group, self.instance_id, self.cooperative = h, group, instance_id, cooperative
        self.session, self.rebalance = session, rebalance
        self.member_id = ""
        self.generation = -1
        self.owned: set[tuple[str, int]] = set()
        self.pending: tuple[str, int] | None = None  # ("join" | "sync", token) awaiting an answer
        self.needs_join = True

    def protocols(self) -> list[tuple[str, bytes]]:
        owned = [ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=sorted(p for _, p in self.owned))]
        sub = ConsumerProtocolSubscription(topics=["t"], owned_partitions=owned if self.owned else [],
                                           generation_id=self.generation)
        name = "cooperative-sticky" if self.cooperative else "range"
        return [(name, encode_subscription(sub, 1))]

    def _join(self) -> None:
        if not self.cooperative:
            self.owned = set()  # eager: everything is given up before joining
        token = self.h.join(self.group, self.member_id, instance_id=self.instance_id, protocols=self.protocols(),
                            session=self.session, rebalance=self.rebalance)
        self.pending = ("join", token)

    def step(self) -> None:
        """One move of the client: answer what came back, or heartbeat."""
        if self.pending is None:
            if self.needs_join:
                self._join()
            else:
                err = self.h.heartbeat(self.group, self.member_id, self.generation, instance_id=self.instance_id)
                if err == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.needs_join = True
                elif err in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID):
                    self._reset(err)
            return
        kind, token = self.pending
        if not self.h.answered(token):
            return
        self.pending = None
        resp = self.h.response(token)
        if kind == "join":
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                self._join()
                return
            if resp.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._join()
                return
            if resp.error_code != 0:
                self._reset(resp.error_code)
                return
            self.member_id, self.generation = resp.member_id, resp.generation_id
            assignments = None
            if resp.leader == self.member_id and resp.members:
                assignments = self._assign(resp.members)
            sync = self.h.sync(self.group, self.member_id, self.generation, assignments, instance_id=self.instance_id,
                               protocol_type="consumer", protocol_name=resp.protocol_name)
            self.pending = ("sync", sync)
        else:
            if resp.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._join()
                return
            if resp.error_code != 0:
                self._reset(resp.error_code)
                return
            given = {(tp.topic, p) for tp in decode_assignment(resp.assignment).assigned_partitions
                     for p in tp.partitions}
            lost = self.owned - given
            self.owned = given
            # A cooperative member that had to give something up rejoins at once.
            self.needs_join = bool(lost) and self.cooperative

    @staticmethod
    def _assign(members: list[Any]) -> dict[str, bytes]:
        """Round-robin over the members. Like a cooperative assignor, a partition some member says
        it still owns goes to no one else in this round (it is revoked first)."""
        ids = [m.member_id for m in members]
        owner: dict[tuple[str, int], str] = {}
        for m in members:
            for tp in decode_subscription(m.metadata).owned_partitions:
                for p in tp.partitions:
                    owner[(tp.topic, p)] = m.member_id
        out = {}
        for i, mid in enumerate(ids):
            mine = {("t", p) for p in range(4) if p % len(ids) == i}
            out[mid] = assignment_bytes({tp for tp in mine if owner.get(tp, mid) == mid})
        return out

    def _reset(self, error: int) -> None:
        # INCONSISTENT_GROUP_PROTOCOL: the group's classic members share no protocol with this one
        # (eager and cooperative clients mixed); it stays out and tries again, as librdkafka does.
        assert error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID,
                         ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.INCONSISTENT_GROUP_PROTOCOL), error
        self.owned = set()
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        self.generation = -1
        self.needs_join = True

    def held(self) -> set[tuple[str, int]]:
        return set(self.owned)


def held_by(m: Any) -> set[tuple[str, int]]:
    if isinstance(m, ClassicMember):
        return m.held()
    return {("t", p) for _, p in m.held()}


def check_exclusive(members: list[Any]) -> None:
    owners: dict[tuple[str, int], int] = {}
    for i, m in enumerate(members):
        for tp in held_by(m):
            assert tp not in owners, f"{tp} held by members {owners[tp]} and {i}"
            owners[tp] = i
