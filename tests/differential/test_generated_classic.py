"""Generated sequences of classic group requests from two or three members (joins, syncs, current
and stale heartbeats, duplicate joins, unknown member ids, leaves), driven against Apache Kafka and
kcoord alike, every answer compared.

Timeouts play no part: sessions and rebalances are given far longer than a sequence lasts, so what
a request answers, and whether it is answered at once or only when a later request completes the
rebalance (a JoinGroup waiting for the other members, a follower's SyncGroup waiting for the
leader's), follows from the sequence alone. Each member has its own connection and at most one
request outstanding; after each step the driver reads every answer that comes within a short quiet
window, and a member still waiting skips its steps until its answer comes. Answers are kept per
member, in order, so that the comparison does not depend on which connection answered first."""

from __future__ import annotations

import select
import time
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.wire_client import WireClient
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.sync_group import SyncGroupRequest
from tests.differential.harness import Normalizer, Pair, Target, differences, unique

pytestmark = pytest.mark.differential

OPS = ("join", "join", "sync", "heartbeat", "stale_heartbeat", "leave", "join_unknown_id", "join_other_protocol")
QUIET_S = 0.5
SESSION_MS = 30000
REBALANCE_MS = 60000


@dataclass
class Member:
    conn: WireClient
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    peers: list[str] = field(default_factory=list)
    outstanding: tuple[int, int, int] | None = None  # api key, version, correlation id
    answers: list[object] = field(default_factory=list)


class Driver:
    def __init__(self, target: Target, group: str, members: int) -> None:
        self.group = group
        self.members = [Member(target.client(f"member{i}")) for i in range(members)]

    def send(self, m: Member, api: int, version: int, body: object, *, immediate: bool = False) -> None:
        m.outstanding = (api, version, m.conn.send(api, version, body))
        if immediate:
            self.receive(m)  # never held by the protocol: read it whatever it takes

    def step(self, index: int, op: str) -> None:
        m = self.members[index]
        if m.outstanding is not None:
            return  # still waiting for an answer: a client sends nothing else meanwhile
        if op.startswith("join"):
            member_id = "unknown-member-id" if op == "join_unknown_id" else m.member_id
            name = "roundrobin" if op == "join_other_protocol" else "range"
            # A join without a member id (MEMBER_ID_REQUIRED) or with an unknown one is answered at
            # once; a member's join may wait for the others.
            self.send(m, 11, 9, JoinGroupRequest(
                group_id=self.group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
                member_id=member_id, protocol_type="consumer",
                protocols=[JoinGroupRequest.Protocol(name=name, metadata=b"subscription")]),
                immediate=member_id in ("", "unknown-member-id"))
        elif op == "sync":
            assignments = ([SyncGroupRequest.Assignment(member_id=p, assignment=f"part-{i}".encode())
                            for i, p in enumerate(sorted(m.peers))] if m.leader else [])
            self.send(m, 14, 5, SyncGroupRequest(
                group_id=self.group, generation_id=m.generation, member_id=m.member_id, protocol_type="consumer",
                protocol_name="range", assignments=assignments))
        elif op in ("heartbeat", "stale_heartbeat"):
            generation = m.generation - 1 if op == "stale_heartbeat" else m.generation
            self.send(m, 12, 4, HeartbeatRequest(group_id=self.group, generation_id=generation,
                                                 member_id=m.member_id), immediate=True)
        elif op == "leave":
            self.send(m, 13, 5, LeaveGroupRequest(group_id=self.group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m.member_id)]), immediate=True)
        self.settle()

    def settle(self) -> None:
        """Reads the answers that come until none has come for a quiet window."""
        deadline = time.monotonic() + QUIET_S
        while True:
            waiting = [m for m in self.members if m.outstanding is not None]
            ready = [m for m in waiting if m.conn.buf]
            if not ready and waiting:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    return
                readable, _, _ = select.select([m.conn.sock for m in waiting], [], [], timeout)
                ready = [m for m in waiting if m.conn.sock in readable]
            if not ready:
                return
            for m in ready:
                self.receive(m)
            deadline = time.monotonic() + QUIET_S

    def receive(self, m: Member) -> None:
        assert m.outstanding is not None
        api, version, corr = m.outstanding
        answer = m.conn.recv(api, version, corr)
        m.outstanding = None
        m.answers.append(answer)
        if api == 11:
            if answer.error_code in (0, 79):
                m.member_id = answer.member_id
            if answer.error_code == 0:
                m.generation = answer.generation_id
                m.leader = answer.leader == answer.member_id
                m.peers = [p.member_id for p in answer.members]
        elif api == 13 and answer.error_code == 0:
            m.member_id, m.generation, m.leader, m.peers = "", -1, False, []

    def result(self) -> object:
        return {"answers": [m.answers for m in self.members],
                "still_waiting": [m.outstanding is not None for m in self.members]}


def run(target: Target, members: int, steps: list[tuple[int, str]]) -> object:
    driver = Driver(target, unique("generated"), members)
    for index, op in steps:
        driver.step(index % members, op)
    return driver.result()


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(members=st.integers(2, 3),
       steps=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(OPS)), min_size=3, max_size=10))
def test_generated_classic_sequences(pair: Pair, members: int, steps: list[tuple[int, str]]) -> None:
    results = []
    for target in (pair.kafka, pair.kcoord):
        with target.session():
            results.append(Normalizer()(run(target, members, steps)))
    diff = differences(results[0], results[1])
    assert not diff, "Kafka and kcoord differ on " + repr(steps) + ":\n  " + "\n  ".join(diff)
