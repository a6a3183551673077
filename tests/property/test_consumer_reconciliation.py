"""A KIP-848 consumer group under churn: random members join, leave, change subscriptions, stop
heartbeating, revoke slowly and lose responses, while the test plays the coordinator (epochs bumped,
target recomputed and every heartbeating member reconciled as Kafka does, every change applied to
the group through its record methods) and the clients (a client takes what it is given at once,
gives up partitions when it gets to it, and reports what it really owns).

After every step: no partition is owned by two members, in the coordinator's view (assigned plus
pending revocation) or in the clients' (what they hold); a client holds nothing the coordinator
does not count as that member's; the owner index is what the members hold. At any point, once the
churn stops and every member heartbeats a few times, every member owns exactly its target, the
group is Stable, and replaying the records written so far rebuilds the same group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.coordinators.group.core.consumer.assignor_api import (
    Assignment,
    GroupSpec,
    TopicDescriber,
    TopicId,
)
from broker.coordinators.group.core.consumer.group import ConsumerGroup, ConsumerGroupState
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember, MemberMetadata, MemberState
from broker.coordinators.group.core.consumer.reconcile import (
    FencedMemberEpochError,
    reconcile,
    validate_member_epoch,
)
from broker.coordinators.group.core.consumer.target_assignment import build_target_assignment

TOPIC_IDS = {"orders": b"\x01" * 16, "payments": b"\x02" * 16, "audit": b"\x03" * 16}
PARTITIONS = {TOPIC_IDS["orders"]: 4, TOPIC_IDS["payments"]: 3, TOPIC_IDS["audit"]: 1}
SESSION_TIMEOUT_MS = 45_000
REBALANCE_TIMEOUT_MS = 30_000
MAX_CLIENTS = 6

subscriptions = st.frozensets(st.sampled_from(sorted(TOPIC_IDS)), min_size=1)


class Topics:
    def partition_count(self, topic: TopicId) -> int:
        return PARTITIONS.get(topic, -1)

    def racks_for_partition(self, topic: TopicId, partition: int) -> frozenset[str]:
        return frozenset()


class RoundRobin:
    """Deals each topic's partitions to its subscribers in member-id order, starting one member
    further for each topic. Not sticky: targets move a lot, which is what the test wants."""

    name = "round-robin"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {member_id: {} for member_id in group.members}
        for shift, topic in enumerate(sorted(PARTITIONS)):
            subscribers = sorted(m for m, spec in group.members.items() if topic in spec.subscribed_topics)
            if not subscribers:
                continue
            for partition in range(topics.partition_count(topic)):
                member_id = subscribers[(partition + shift) % len(subscribers)]
                out[member_id][topic] = out[member_id].get(topic, frozenset()) | {partition}
        return out


def resolve(names: frozenset[str]) -> frozenset[TopicId]:
    return frozenset(TOPIC_IDS[n] for n in names)


class Fenced(Exception):
    """FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: the client must drop everything and rejoin."""


@dataclass
class Coordinator:
    group: ConsumerGroup = field(default_factory=lambda: ConsumerGroup("billing"))
    log: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    now: int = 0
    last_heartbeat: dict[str, int] = field(default_factory=dict)
    revocation_deadline: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (epoch, at)
    removed: list[str] = field(default_factory=list)  # members fenced by a timer, for their clients

    def write(self, method: str, *args: Any) -> None:
        """Apply a record to the group, and keep it for the replay check."""
        self.log.append((method, args))
        getattr(self.group, method)(*args)

    def heartbeat(
        self, member_id: str, epoch: int, owned: Assignment | None, names: frozenset[str]
    ) -> tuple[int, Assignment]:
        group = self.group
        member = group.member(member_id)
        if member is None:
            if epoch != 0:
                raise Fenced("unknown member id")
            member = ConsumerGroupMember(member_id)
        else:
            try:
                validate_member_epoch(member, epoch, owned)
            except FencedMemberEpochError as e:
                event("heartbeat fenced")
                raise Fenced(str(e)) from e
            if epoch < member.member_epoch:
                event("previous epoch accepted")
        # 1. The member's metadata, and a new group epoch when its subscription changed.
        metadata = MemberMetadata(subscribed_topic_names=names, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS)
        is_new = group.member(member_id) is None
        subscription_changed = is_new or member.subscribed_topic_names != names
        if is_new or member.metadata != metadata:
            self.write("update_member_metadata", member_id, metadata)
        if subscription_changed:
            self.write("set_group_epoch", group.group_epoch + 1, 0)
        # 2. A new target assignment when the group epoch moved past it.
        if group.group_epoch > group.assignment_epoch:
            self.compute_target()
        # 3. One reconciliation step.
        member = group.member(member_id)
        assert member is not None
        if not member.is_reconciled_to(group.assignment_epoch) or subscription_changed:
            updated = reconcile(
                member,
                group.assignment_epoch,
                group.member_target(member_id),
                group.owner_epoch,
                owned,
                subscribed_topics=resolve(names),
                subscription_changed=subscription_changed,
            )
            if updated != member:
                event(f"member {updated.state.name}")
                self.write("update_member_current_assignment", member_id, updated.current_assignment)
                if updated.state is MemberState.UNREVOKED_PARTITIONS:
                    deadline = (updated.member_epoch, self.now + REBALANCE_TIMEOUT_MS)
                    self.revocation_deadline[member_id] = deadline
                else:
                    self.revocation_deadline.pop(member_id, None)
            member = updated
        self.last_heartbeat[member_id] = self.now
        return member.member_epoch, member.assigned_partitions

    def compute_target(self) -> None:
        group = self.group
        result = build_target_assignment(
            group_epoch=group.group_epoch,
            members=group.members,
            subscriptions={m.member_id: resolve(m.subscribed_topic_names) for m in group.members.values()},
            topics=Topics(),
            current_target=group.target_assignment,
            static_members=group.static_members,
            assignor=RoundRobin(),
        )
        for member_id, partitions in result.changed.items():
            self.write("update_target_assignment", member_id, partitions)
        self.write("set_target_assignment_epoch", result.epoch)

    def fence(self, member_id: str) -> None:
        """Remove a member as Kafka does: its three tombstones, then a new group epoch."""
        self.write("clear_member_current_assignment", member_id)
        self.write("remove_target_assignment", member_id)
        self.write("remove_member", member_id)
        self.write("set_group_epoch", self.group.group_epoch + 1, 0)
        self.last_heartbeat.pop(member_id, None)
        self.revocation_deadline.pop(member_id, None)

    def advance(self, ms: int) -> None:
        self.now += ms
        for member_id, seen in sorted(self.last_heartbeat.items()):
            if self.now - seen >= SESSION_TIMEOUT_MS:
                self.fence(member_id)
                self.removed.append(member_id)
        for member_id, (epoch, at) in sorted(self.revocation_deadline.items()):
            member = self.group.member(member_id)
            if self.now >= at and member is not None and member.member_epoch == epoch:
                event("fenced by the rebalance timeout")
                self.fence(member_id)
                self.removed.append(member_id)


@dataclass
class Client:
    member_id: str
    names: frozenset[str]
    epoch: int = 0
    owned: Assignment = field(default_factory=dict)
    given: Assignment = field(default_factory=dict)  # the last assignment received
    heartbeating: bool = True
    slow: bool = False  # gives partitions up only when told to finish revoking

    def take(self, given: Assignment, others: Mapping[str, Client]) -> None:
        """New partitions are taken at once; the ones no longer given are dropped now, or later
        by a slow client."""
        for topic, partitions in given.items():
            new = partitions - self.owned.get(topic, frozenset())
            for other in others.values():
                if other is not self:
                    clash = new & other.owned.get(topic, frozenset())
                    assert not clash, f"{self.member_id} given {sorted(clash)} still owned by {other.member_id}"
        self.given = given
        merged = dict(self.owned)
        for topic, partitions in given.items():
            merged[topic] = merged.get(topic, frozenset()) | partitions
        self.owned = merged
        if not self.slow:
            self.finish_revoking()

    def finish_revoking(self) -> None:
        self.owned = {t: p & self.given[t] for t, p in self.owned.items() if p & self.given.get(t, frozenset())}

    def drop_everything(self) -> None:
        self.owned, self.given, self.epoch = {}, {}, 0


class ConsumerGroupChurn(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.coordinator = Coordinator()
        self.clients: dict[str, Client] = {}
        self.next_id = 0

    # ------------------------------------------------------------------ client actions

    def _client(self, index: int) -> Client:
        return self.clients[sorted(self.clients)[index % len(self.clients)]]

    def _new_member_id(self) -> str:
        self.next_id += 1
        return f"member-{self.next_id:03d}"

    def _heartbeat(self, client: Client, lose_response: bool = False) -> None:
        self._notice_removals()
        try:
            epoch, given = self.coordinator.heartbeat(client.member_id, client.epoch, client.owned, client.names)
        except Fenced:
            self._rejoin(client)
            return
        if lose_response:
            return
        client.epoch = epoch
        client.take(given, self.clients)

    def _rejoin(self, client: Client) -> None:
        """A fenced client drops its partitions, leaves, and joins again as a new member."""
        client.drop_everything()
        if self.coordinator.group.member(client.member_id) is not None:
            self.coordinator.fence(client.member_id)
        del self.clients[client.member_id]
        client.member_id = self._new_member_id()
        self.clients[client.member_id] = client

    def _notice_removals(self) -> None:
        # A member removed by a timer has stopped: its client holds nothing any more.
        for member_id in self.coordinator.removed:
            client = self.clients.get(member_id)
            if client is not None:
                client.drop_everything()
        self.coordinator.removed.clear()

    @initialize(first=st.lists(subscriptions, min_size=1, max_size=3))
    def first_members(self, first: list[frozenset[str]]) -> None:
        for names in first:
            self.join(names)

    @precondition(lambda self: len(self.clients) < MAX_CLIENTS)
    @rule(names=subscriptions)
    def join(self, names: frozenset[str]) -> None:
        client = Client(self._new_member_id(), names)
        self.clients[client.member_id] = client
        self._heartbeat(client)

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 100), lose_response=st.booleans())
    def heartbeat(self, index: int, lose_response: bool) -> None:
        client = self._client(index)
        if client.heartbeating:
            self._heartbeat(client, lose_response)

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 100))
    def leave(self, index: int) -> None:
        client = self._client(index)
        client.drop_everything()
        if self.coordinator.group.member(client.member_id) is not None:
            self.coordinator.fence(client.member_id)
        del self.clients[client.member_id]

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 100), names=subscriptions)
    def change_subscription(self, index: int, names: frozenset[str]) -> None:
        client = self._client(index)
        client.names = names
        if client.heartbeating:
            self._heartbeat(client)

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 100), heartbeating=st.booleans(), slow=st.booleans())
    def change_behaviour(self, index: int, heartbeating: bool, slow: bool) -> None:
        client = self._client(index)
        client.heartbeating, client.slow = heartbeating, slow
        if not slow:
            client.finish_revoking()

    @precondition(lambda self: self.clients)
    @rule(index=st.integers(0, 100))
    def finish_revoking(self, index: int) -> None:
        self._client(index).finish_revoking()

    @rule(ms=st.integers(1_000, 40_000))
    def tick(self, ms: int) -> None:
        self.coordinator.advance(ms)
        self._notice_removals()

    @rule()
    def settle(self) -> None:
        """The churn stops: every client heartbeats promptly for a while."""
        for client in self.clients.values():
            client.heartbeating, client.slow = True, False
            client.finish_revoking()
        for _ in range(8):
            for member_id in sorted(self.clients):
                client = self.clients.get(member_id)
                if client is not None:
                    self._heartbeat(client)
            self.coordinator.advance(1_000)
            self._notice_removals()
        group = self.coordinator.group
        assert set(group.members) == set(self.clients)
        for member_id, member in group.members.items():
            assert member.state is MemberState.STABLE, (member_id, member)
            assert member.member_epoch == group.assignment_epoch == group.group_epoch
            assert member.assigned_partitions == group.member_target(member_id)
            assert self.clients[member_id].owned == member.assigned_partitions
        assert group.state is (ConsumerGroupState.STABLE if self.clients else ConsumerGroupState.EMPTY)
        if self.clients:
            everything = {(t, p) for t, n in PARTITIONS.items() for p in range(n) if self._subscribed(t)}
            owned = {(t, p) for c in self.clients.values() for t, ps in c.owned.items() for p in ps}
            assert owned == everything
        self._check_replay()

    def _subscribed(self, topic: TopicId) -> bool:
        return any(topic in resolve(c.names) for c in self.clients.values())

    def _check_replay(self) -> None:
        replayed = ConsumerGroup("billing")
        for method, args in self.coordinator.log:
            getattr(replayed, method)(*args)
        group = self.coordinator.group
        assert dict(replayed.members) == dict(group.members)
        assert dict(replayed.target_assignment) == dict(group.target_assignment)
        assert (replayed.group_epoch, replayed.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
        assert sorted(replayed.owned_partitions()) == sorted(group.owned_partitions())
        assert replayed.subscribed_topic_names() == group.subscribed_topic_names()

    # ---------------------------------------------------------------------- invariants

    @invariant()
    def no_partition_owned_twice_by_members(self) -> None:
        seen: dict[tuple[TopicId, int], str] = {}
        expected_index: set[tuple[TopicId, int, int]] = set()
        for member_id, member in self.coordinator.group.members.items():
            for held in (member.assigned_partitions, member.partitions_pending_revocation):
                for topic, partitions in held.items():
                    for p in partitions:
                        assert (topic, p) not in seen, f"{topic.hex()}-{p}: {seen[(topic, p)]} and {member_id}"
                        seen[(topic, p)] = member_id
                        expected_index.add((topic, p, member.member_epoch))
        assert set(self.coordinator.group.owned_partitions()) == expected_index

    @invariant()
    def no_partition_held_by_two_clients(self) -> None:
        seen: dict[tuple[TopicId, int], str] = {}
        for client in self.clients.values():
            for topic, partitions in client.owned.items():
                for p in partitions:
                    assert (topic, p) not in seen, f"{topic.hex()}-{p}: {seen[(topic, p)]} and {client.member_id}"
                    seen[(topic, p)] = client.member_id

    @invariant()
    def clients_hold_only_what_the_coordinator_counts_as_theirs(self) -> None:
        for client in self.clients.values():
            member = self.coordinator.group.member(client.member_id)
            for topic, partitions in client.owned.items():
                assert member is not None
                counted = member.assigned_partitions.get(topic, frozenset()) | member.partitions_pending_revocation.get(
                    topic, frozenset()
                )
                assert partitions <= counted, (client.member_id, topic.hex(), partitions, counted)

    def teardown(self) -> None:
        self.settle()


ConsumerGroupChurn.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_consumer_group_churn = ConsumerGroupChurn.TestCase
