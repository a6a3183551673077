"""A group whose members come and go on both protocols at random, on one shard with a fake clock:
classic clients (eager and cooperative) and consumer-protocol clients join, take steps, leave,
crash and wait, so the group is upgraded to a consumer group and downgraded back to classic again
and again (online migration).

After every step no partition is held by two live clients. Whenever the churn stops and the
clients keep going for a while, together they hold every partition exactly once, and a restart
rebuilds the same groups from the records written so far."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.coordinators.group.core import CoordinatorConfig
from protocol.errors import ErrorCode
from tests.unit.coordinators.group.core.consumer.classic_members import (
    ALL,
    ClassicMember,
    check_exclusive,
    held_by,
)
from tests.unit.coordinators.group.core.consumer.members import Member
from tests.unit.coordinators.group.core.harness import Harness

CONFIG = CoordinatorConfig(consumer_session_timeout_ms=6000, consumer_heartbeat_interval_ms=500,
                           group_initial_rebalance_delay_ms=0)
MAX_CLIENTS = 5


def _step(client: Any) -> None:
    client.silent_ms = 0
    if isinstance(client, ClassicMember):
        client.step()
        return
    resp = client.beat()
    if resp.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.GROUP_ID_NOT_FOUND):
        # Fenced, or its group went back to classic while it was away (Kafka answers that
        # GROUP_ID_NOT_FOUND): it has lost its partitions and rejoins with epoch 0.
        client.owned, client.epoch = {}, 0


def _session_ms(client: Any) -> int:
    return client.session if isinstance(client, ClassicMember) else CONFIG.consumer_session_timeout_ms


def _silence(client: Any, ms: int) -> None:
    """A client that could not heartbeat for its whole session timeout treats its partitions as
    lost (librdkafka does, for both protocols): by then the broker may have given them away."""
    client.silent_ms = getattr(client, "silent_ms", 0) + ms
    if client.silent_ms >= _session_ms(client):
        if isinstance(client, ClassicMember):
            # Whatever it had in flight is stale too: it starts over with a new join.
            client.owned, client.pending, client.generation = set(), None, -1
            client.needs_join = True
        else:
            client.owned = {}


def _view(h: Harness) -> Any:
    st_ = h.shard.state
    consumer = st_.consumer_groups.get("g")
    classic = st_.groups.get("g")
    return (
        None if consumer is None else (consumer.group_epoch, consumer.assignment_epoch, {
            mid: (m.member_epoch, m.state, m.assigned_partitions, m.partitions_pending_revocation, m.classic)
            for mid, m in consumer.members.items()}, dict(consumer.target_assignment)),
        None if classic is None else (classic.generation, classic.protocol_name, sorted(classic.members)),
        st_.offsets.snapshot(),
    )


class MigratingGroup(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(CONFIG)
        self.live: list[Any] = []
        self.ids = 0

    @initialize(classic=st.integers(0, 3), cooperative=st.booleans())
    def running_group(self, classic: int, cooperative: bool) -> None:
        """Most runs start from a running classic group, the group a migration starts from."""
        for _ in range(classic):
            self.start_classic(cooperative, static=False)
        self.step_everyone(20)

    def _name(self) -> str:
        self.ids += 1
        return f"c{self.ids}"

    @precondition(lambda self: len(self.live) < MAX_CLIENTS)
    @rule(cooperative=st.booleans(), static=st.booleans())
    def start_classic(self, cooperative: bool, static: bool) -> None:
        instance = f"i{self.ids}" if static else None
        self.ids += 1
        self.live.append(ClassicMember(self.h, cooperative=cooperative, instance_id=instance, session=6000,
                                       rebalance=8000))

    @precondition(lambda self: len(self.live) < MAX_CLIENTS)
    @rule()
    def start_consumer(self) -> None:
        self.live.append(Member(self.h, self._name()))

    @rule(rounds=st.integers(1, 6))
    def step_everyone(self, rounds: int) -> None:
        for _ in range(rounds):
            for client in list(self.live):
                _step(client)
                check_exclusive(self.live)
            self.h.sleep(100)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        client = self.live.pop(data.draw(st.integers(0, len(self.live) - 1)))
        if isinstance(client, ClassicMember):
            if client.member_id and client.pending is None:
                self.h.leave("g", [(client.member_id, client.instance_id)])
        elif client.epoch > 0:
            client.beat(epoch=-1)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        # The client stops dead: it consumes nothing more; the broker finds out from its session.
        self.live.pop(data.draw(st.integers(0, len(self.live) - 1)))

    @rule(ms=st.sampled_from([200, 2000, 7000]))
    def wait(self, ms: int) -> None:
        # Nobody heartbeats meanwhile: sessions may end, classic clients may be evicted.
        for client in self.live:
            _silence(client, ms)
        self.h.sleep(ms)

    @invariant()
    def no_partition_is_held_twice(self) -> None:
        check_exclusive(self.live)

    def teardown(self) -> None:
        # The churn stops; every live client keeps going past every session timeout.
        for _ in range(150):
            for client in self.live:
                _step(client)
                check_exclusive(self.live)
            self.h.sleep(100)
        if self.live:
            held = [held_by(c) for c in self.live]
            assert set().union(*held) == ALL and sum(len(x) for x in held) == len(ALL), held
        before = _view(self.h)
        self.h.restart()
        assert _view(self.h)[0] == before[0]
        if before[1] is not None:
            after = _view(self.h)[1]
            assert after is not None and (after[0], sorted(after[2])) == (before[1][0], sorted(before[1][2]))
        assert _view(self.h)[2] == before[2]


MigratingGroup.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None,
                                            suppress_health_check=[HealthCheck.too_slow])
test_migrating_group = MigratingGroup.TestCase
