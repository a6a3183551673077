"""Random clients against one coordinator shard, with restarts, checking the group invariants.

Clients behave like real ones (they keep the member id and generation they were given and act
on them) but choose what to send at random, including stale ids after a restart. After every step:
generations never go back within a shard's life; a restart loads exactly the persisted
generation; a group has at most one leader, a member of it; no id is both pending and a member;
in Stable every member holds the assignment stored for the current generation; every waiting
group and member has a timer that will move it on; and replaying the records written so far into
a fresh shard gives the same persisted state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from broker.coordinators.group.core import CoordinatorConfig, GroupCoordinatorShard, decode_record
from broker.coordinators.group.core.base.classic_group import ClassicGroup, GroupState
from tests.unit.coordinators.group.core.harness import Harness, subscription

NONE, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS = 0, 25, 22, 27
FENCED_INSTANCE_ID, MEMBER_ID_REQUIRED = 82, 79


@dataclass
class Client:
    group: str
    instance_id: str | None
    client_id: str
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: list[str] = field(default_factory=list)
    synced: bool = False
    rejoin: bool = False


CLIENTS = [
    ("g1", None), ("g1", None), ("g1", None), ("g1", "i-a"), ("g2", None), ("g2", "i-b"), ("g2", "i-c"),
]
PROTOCOLS = {
    "range": lambda t: [("range", subscription(*t))],
    "rr": lambda t: [("roundrobin", subscription(*t))],
    "both": lambda t: [("roundrobin", subscription(*t)), ("range", subscription(*t))],
}


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h: Harness
        self.clients = [Client(g, i, f"c{n}") for n, (g, i) in enumerate(CLIENTS)]
        self.outstanding: dict[int, tuple[int, str]] = {}
        # group id -> (the group object, generation); holding the object keeps its identity unique
        self.seen_generation: dict[str, tuple[ClassicGroup, int]] = {}
        self.leaders: dict[tuple[str, int], set[str]] = {}

    @initialize(delay=st.sampled_from([0, 3000]), max_size=st.sampled_from([2, 2**31 - 1]))
    def start(self, delay: int, max_size: int) -> None:
        self.h = Harness(CoordinatorConfig(group_initial_rebalance_delay_ms=delay, group_max_size=max_size,
                                           offsets_retention_ms=400_000, offsets_retention_check_interval_ms=60_000))

    # ---- client behaviour ---------------------------------------------------------------

    def _send(self, n: int, kind: str, token: int) -> None:
        self.outstanding[token] = (n, kind)
        self._collect()

    def _collect(self) -> None:
        for token, (n, kind) in list(self.outstanding.items()):
            if not self.h.answered(token):
                continue
            del self.outstanding[token]
            c, r = self.clients[n], self.h.response(token)
            if kind == "join":
                if r.error_code == NONE:
                    c.member_id, c.generation = r.member_id, r.generation_id
                    c.synced, c.rejoin = False, False
                    c.leader = r.leader == r.member_id
                    c.members = [m.member_id for m in r.members]
                    if c.leader and not r.skip_assignment:
                        self.leaders.setdefault((c.group, r.generation_id), set()).add(r.member_id)
                elif r.error_code == MEMBER_ID_REQUIRED:
                    c.member_id = r.member_id
                elif r.error_code in (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID):
                    c.member_id, c.generation, c.leader = "", -1, False
            elif _error(r) in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID):
                c.member_id, c.generation, c.leader = "", -1, False
            elif _error(r) == REBALANCE_IN_PROGRESS:
                c.rejoin = True
            elif kind == "sync" and r.error_code == NONE:
                c.synced = True

    @rule(n=st.integers(0, len(CLIENTS) - 1), version=st.sampled_from([0, 3, 4, 5, 7, 9]),
          topics=st.sampled_from([("t",), ("t", "u")]), protocol=st.sampled_from(sorted(PROTOCOLS)),
          session=st.sampled_from([6000, 10_000, 30_000]), rebalance=st.sampled_from([6000, 30_000]))
    def join(self, n: int, version: int, topics: tuple[str, ...], protocol: str, session: int, rebalance: int) -> None:
        c = self.clients[n]
        token = self.h.join(c.group, c.member_id, client_id=c.client_id, instance_id=c.instance_id,
                            protocols=PROTOCOLS[protocol](topics), session=session, rebalance=rebalance,
                            version=version)
        self._send(n, "join", token)

    def _act(self, n: int) -> None:
        """What a well-behaved client does next."""
        c = self.clients[n]
        if any(kind in ("join", "sync") and m == n for m, kind in self.outstanding.values()):
            self.heartbeat(n)
        elif c.member_id == "" or c.generation < 0 or c.rejoin:
            self.join(n, 9, ("t",), "range", 30_000, 30_000)
        elif not c.synced:
            self.sync(n, 5)
        else:
            self.heartbeat(n)

    @rule(n=st.integers(0, len(CLIENTS) - 1))
    def act(self, n: int) -> None:
        self._act(n)

    @rule(n=st.integers(0, len(CLIENTS) - 1))
    def act_again(self, n: int) -> None:
        self._act(n)

    @rule(n=st.sampled_from([n for n, (_, i) in enumerate(CLIENTS) if i]), protocol=st.sampled_from(sorted(PROTOCOLS)))
    def restart_static_client(self, n: int, protocol: str) -> None:
        """A static member's process restarts: it rejoins with its instance id and no member id."""
        c = self.clients[n]
        c.member_id = ""
        self.join(n, 9, ("t",), protocol, 30_000, 30_000)

    @rule(n=st.integers(0, len(CLIENTS) - 1), version=st.sampled_from([0, 3, 5]))
    def sync(self, n: int, version: int) -> None:
        c = self.clients[n]
        assignments = {m: f"{m}@{c.generation}".encode() for m in c.members} if c.leader else {}
        token = self.h.sync(c.group, c.member_id, c.generation, assignments, instance_id=c.instance_id,
                            version=version)
        self._send(n, "sync", token)

    @rule(n=st.integers(0, len(CLIENTS) - 1))
    def heartbeat(self, n: int) -> None:
        c = self.clients[n]
        self.h.heartbeat(c.group, c.member_id, c.generation, instance_id=c.instance_id, version=3)
        self._send(n, "heartbeat", self.h._token)

    @rule(n=st.integers(0, len(CLIENTS) - 1), version=st.sampled_from([0, 3, 5]),
          by_instance=st.booleans())
    def leave(self, n: int, version: int, by_instance: bool) -> None:
        c = self.clients[n]
        member = "" if by_instance and c.instance_id and version >= 3 else c.member_id
        self.h.leave(c.group, [(member, c.instance_id)], version=version)
        self._send(n, "leave", self.h._token)

    @rule(n=st.integers(0, len(CLIENTS) - 1), as_member=st.booleans(), partition=st.integers(0, 3),
          topic=st.sampled_from(["t", "u"]), offset=st.integers(-1, 1000))
    def commit(self, n: int, as_member: bool, partition: int, topic: str, offset: int) -> None:
        c = self.clients[n]
        if as_member:
            self.h.commit(c.group, {(topic, partition): offset}, generation=c.generation, member_id=c.member_id,
                          instance_id=c.instance_id)
        else:
            self.h.commit(c.group, {(topic, partition): offset})
        self._send(n, "commit", self.h._token)

    @rule(group=st.sampled_from(["g1", "g2"]), topic=st.sampled_from(["t", "u"]))
    def delete_offsets(self, group: str, topic: str) -> None:
        self.h.delete_offsets(group, {topic: [0, 1]})

    @rule(group=st.sampled_from(["g1", "g2"]))
    def delete_group(self, group: str) -> None:
        self.h.delete_group(group)

    @rule(ms=st.sampled_from([0, 500, 3000, 6000, 20_000, 40_000, 700_000]))
    def sleep(self, ms: int) -> None:
        self.h.sleep(ms)
        self._collect()

    @rule()
    def restart(self) -> None:
        persisted = {g: v.generation for g, v in self.h.shard.state.persisted.items()}
        self.h.restart()
        # Generations that were never persisted are handed out again after a restart, as in Kafka.
        self.leaders.clear()
        self._collect()
        for g, group in self.h.shard.state.groups.items():
            if g in persisted:
                assert group.generation == persisted[g]
            self.seen_generation[g] = (group, group.generation)

    # ---- invariants -----------------------------------------------------------------------

    @invariant()
    def generations_never_go_back(self) -> None:
        if not hasattr(self, "h"):
            return
        for g, group in self.h.shard.state.groups.items():
            seen, gen = self.seen_generation.get(g, (group, 0))
            if seen is group:
                assert group.generation >= gen
            else:  # deleted and created again: generations start over
                self.leaders = {k: v for k, v in self.leaders.items() if k[0] != g}
            self.seen_generation[g] = (group, group.generation)

    @invariant()
    def one_leader_per_generation(self) -> None:
        for (g, gen), leaders in self.leaders.items():
            assert len(leaders) <= 1, (g, gen, leaders)

    @invariant()
    def membership_is_consistent(self) -> None:
        if not hasattr(self, "h"):
            return
        st_ = self.h.shard.state
        for g, group in st_.groups.items():
            check_group(group, st_.persisted.get(g), self.h.timers)

    @invariant()
    def replay_gives_the_same_persisted_state(self) -> None:
        if not hasattr(self, "h"):
            return
        fresh = GroupCoordinatorShard(0, self.h.config, self.h.topics, lambda p: f"{p}-fresh")
        for i, (key, value) in enumerate(self.h.log):
            record = decode_record(key, value)
            assert record is not None
            fresh.replay(record, i)
        fresh.on_loaded(self.h.now)
        assert fresh.snapshot() == self.h.shard.snapshot()
        for g, value in fresh.state.persisted.items():
            assert fresh.state.groups[g].to_metadata_value().to_dict() == value.to_dict()


def _error(response: Any) -> int:
    if hasattr(response, "error_code"):
        return int(response.error_code)
    errors = [p.error_code for t in response.topics for p in t.partitions]  # OffsetCommit
    return int(errors[0]) if errors else NONE


def check_group(group: ClassicGroup, persisted: Any, timers: dict[str, int]) -> None:
    members = group.members
    g = group.group_id
    assert not set(group.pending_members) & set(members)
    if members:
        assert group.leader_id in members
    else:
        assert group.leader_id is None
    assert group.num_awaiting_join == sum(m.awaiting_join is not None for m in members.values())
    assert {n: c for n, c in group.supported_protocols.items() if c} == _protocol_counts(group)
    assert set(group.static_members.values()) == {m.member_id for m in members.values() if m.group_instance_id}
    state = group.state
    if state is GroupState.EMPTY:
        assert not members
    if state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert all(m.awaiting_join is None for m in members.values())
    if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
        assert all(m.awaiting_sync is None for m in members.values())
    if state is GroupState.STABLE:
        assert persisted is not None and persisted.generation == group.generation
        assert persisted.leader == group.leader_id and persisted.protocol == group.protocol_name
        assert [(m.member_id, m.assignment) for m in persisted.members] == [
            (m.member_id, m.assignment) for m in members.values()]
    # Nothing waits forever: a rebalance has its timer, and so has every member not parked.
    if state is GroupState.PREPARING_REBALANCE:
        assert f"join:{g}" in timers
    if state is GroupState.COMPLETING_REBALANCE:
        assert f"sync:{g}" in timers
    for m in members.values():
        if m.awaiting_join is None and m.awaiting_sync is None:
            assert f"heartbeat:{g}:{m.member_id}" in timers
    for p in group.pending_members:
        assert f"heartbeat:{g}:{p}" in timers


def _protocol_counts(group: ClassicGroup) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in group.members.values():
        for name in m.names():
            counts[name] = counts.get(name, 0) + 1
    return counts


CoordinatorMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorStateful = CoordinatorMachine.TestCase
