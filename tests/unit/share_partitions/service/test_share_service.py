"""SharePartitionManager over a share coordinator (here its pure shard, answering at once): a share
partition's first use reads its state, its first write initializes it, acknowledgements are
written as updates, a restart reads back what was acknowledged, a failed write is written again
with the next one, and a new leader's epoch fences a former leader's writes."""

from __future__ import annotations

from typing import Any

from broker.coordinators.share.core.shard import ShareCoordinatorShard
from broker.coordinators.share.service.coordinator import StateRequest
from broker.share_partitions.core.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    AVAILABLE,
    BatchRange,
    Limits,
    SharePartition,
)
from broker.share_partitions.core.settings import ShareGroupSettings
from broker.share_partitions.service.manager import SharePartitionManager
from protocol.errors import ErrorCode
from protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from protocol.payloads.share_state_records import UPDATE

KEY = ("g", bytes(range(1, 17)), 0)
SETTINGS = ShareGroupSettings()


class ShardPersister:
    """The share coordinator's shard in the same process; ``down`` answers None (not reached)."""

    def __init__(self) -> None:
        self.shard = ShareCoordinatorShard(0)
        self.down = False
        self.records: list[Any] = []

    def send(self, request: StateRequest, deliver: Any) -> None:
        if self.down:
            deliver(None)
            return
        if isinstance(request, WriteShareGroupStateRequest):
            result = self.shard.write_state(1, request, 0)
        elif isinstance(request, ReadShareGroupStateRequest):
            result = self.shard.read_state(1, request, 0)
        elif isinstance(request, InitializeShareGroupStateRequest):
            result = self.shard.initialize_state(1, request, 0)
        elif isinstance(request, DeleteShareGroupStateRequest):
            result = self.shard.delete_state(1, request, 0)
        else:
            result = self.shard.read_state_summary(1, request, 0)
        self.records += result.records
        deliver(result.replies[0][1])


def service(persister: ShardPersister, epoch: list[int] | None = None) -> SharePartitionManager:
    leader = epoch if epoch is not None else [-1]
    return SharePartitionManager(persister, lambda group: SETTINGS, lambda: 0,
                        leader_epoch=lambda topic_id, index: leader[0])


def ready(s: SharePartitionManager) -> bool:
    out: list[bool] = []
    s.prepare([KEY], out.append)
    return out == [True]


def acquire_and_accept(s: SharePartitionManager, first: int, last: int) -> list[bool]:
    sp = s.partitions[KEY]
    sp.acquire("m", [BatchRange(first, last + 5, False)], last + 6, last - first + 6, 0, SETTINGS.limits)
    assert sp.acknowledge("m", first, last, [ACCEPT], SETTINGS.limits) == ErrorCode.NONE
    done: list[bool] = []
    s.persist([KEY], done.append)
    return done


def test_first_use_initializes_then_writes_updates_and_a_restart_reads_them() -> None:
    persister = ShardPersister()
    s = service(persister)
    assert ready(s) and not s.partitions[KEY].initialized
    s.partitions[KEY].initialize(10)
    assert acquire_and_accept(s, 10, 12) == [True]
    state = persister.shard.states[KEY]
    assert (state.state_epoch, state.start_offset) == (1, 13)
    assert persister.records[-1].record_type == UPDATE

    again = service(persister)
    assert ready(again)
    sp = again.partitions[KEY]
    # Accepted records are done; those acquired and never acknowledged are available again.
    assert sp.start_offset == 13 and {o: r.state for o, r in sp.records.items()} == {
        o: AVAILABLE for o in range(13, 18)}
    assert all(r.delivery_count == 1 for r in sp.records.values())


def test_a_failed_write_is_written_with_the_next() -> None:
    persister = ShardPersister()
    s = service(persister)
    assert ready(s)
    s.partitions[KEY].initialize(0)
    persister.down = True
    assert acquire_and_accept(s, 0, 0) == [False]  # the initialization failed: not acknowledged
    persister.down = False
    sp = s.partitions[KEY]
    assert sp.acknowledge("m", 2, 2, [ACCEPT], SETTINGS.limits) == ErrorCode.NONE
    done: list[bool] = []
    s.persist([KEY], done.append)
    assert done == [True]
    state = persister.shard.states[KEY]
    assert state.start_offset == 1
    assert [(b.first, b.last, b.state) for b in state.batches if b.state == ACKNOWLEDGED] == [(2, 2, ACKNOWLEDGED)]


def test_a_new_leader_rereads_and_fences_the_former_one() -> None:
    persister = ShardPersister()
    old_epoch, new_epoch = [5], [7]
    old = service(persister, old_epoch)
    assert ready(old)
    old.partitions[KEY].initialize(0)
    assert acquire_and_accept(old, 0, 1) == [True]
    new = service(persister, new_epoch)
    assert ready(new) and new.partitions[KEY].start_offset == 2
    assert persister.shard.states[KEY].leader_epoch == 7
    # The former leader's late write is refused: it must not overwrite the new leader's state.
    assert acquire_and_accept(old, 2, 2) == [False]
    assert persister.shard.states[KEY].start_offset == 2
    assert KEY not in old.partitions  # stale: read again at its next use
    # This node leads again at a later epoch: the share partition is read afresh.
    old_epoch[0] = 9
    assert ready(old) and old.partitions[KEY].start_offset == 2


def test_state_deleted_elsewhere_is_forgotten_here_not_written_back() -> None:
    """Another node deleted the share partition's state (DeleteGroups, a deleted topic): the
    leader's next write finds none, and the leader forgets what it held instead of initializing
    the old start offset and acknowledgements again; the next use starts afresh."""
    persister = ShardPersister()
    s = service(persister)
    assert ready(s)
    s.partitions[KEY].initialize(0)
    assert acquire_and_accept(s, 0, 2) == [True]
    D = DeleteShareGroupStateRequest.DeleteStateData
    persister.send(DeleteShareGroupStateRequest(group_id=KEY[0], topics=[D(
        topic_id=KEY[1], partitions=[D.PartitionData(partition=KEY[2])])]), lambda r: None)
    assert acquire_and_accept(s, 3, 3) == [False]
    assert KEY not in s.partitions and KEY not in persister.shard.states
    assert ready(s) and not s.partitions[KEY].initialized  # starts where its group's reset says


def test_forget_group_deletes_the_keys_its_coordinator_names_and_those_held_here() -> None:
    persister = ShardPersister()
    s = service(persister)
    assert ready(s)
    s.partitions[KEY].initialize(0)
    assert acquire_and_accept(s, 0, 0) == [True]
    elsewhere = (KEY[0], bytes(range(2, 18)), 3)  # held by another node, named by the group's coordinator
    other = service(persister)
    other.partitions[elsewhere] = SharePartition()
    other.partitions[elsewhere].initialize(5)
    other.persist([elsewhere], lambda ok: None)
    assert set(persister.shard.states) == {KEY, elsewhere}
    done: list[bool] = []
    s.forget_group(KEY[0], [elsewhere], done.append)
    assert done == [True] and not persister.shard.states and KEY not in s.partitions


def test_delivery_trouble_goes_to_the_journal_once_per_round() -> None:
    from broker.share_partitions.core.partition import RELEASE

    persister = ShardPersister()
    written: list[Any] = []
    now = [0]
    s = SharePartitionManager(persister, lambda group: ShareGroupSettings(limits=Limits(lock_ms=100, delivery_limit=1)),
                     lambda: now[0], journal=written.extend, group_info=lambda group: (4, "Stable"),
                     topic_name=lambda topic_id: "orders")
    assert ready(s)
    sp = s.partitions[KEY]
    sp.initialize(0)
    limits = s.limits("g")
    sp.acquire("m", [BatchRange(0, 9, False)], 10, 10, 0, limits)
    assert sp.acknowledge("m", 0, 9, [RELEASE], limits) == ErrorCode.NONE
    s.persist([KEY], lambda ok: None)
    [poison] = written
    assert (poison.cause, poison.group, poison.generation) == ("delivery-limit-reached", "g", 4)
    assert poison.detail["topic"] == "orders" and poison.detail["offsets"] == [[0, 9]]
    assert poison.detail["records"] == 10
    s.persist([KEY], lambda ok: None)
    assert len(written) == 1  # reported once
    sp.acquire("m", [BatchRange(10, 14, False)], 15, 5, 0, limits)
    now[0] = 500
    s.expire_locks(now[0])
    assert [e.cause for e in written[1:]] == ["acquisition-lock-expired", "delivery-limit-reached"]
    assert written[1].detail["offsets"] == [[10, 14]] and written[1].timestamp == 500


class Queue:
    """The dead-letter queue writer as the service sees it: it holds each job until told that the
    queue has it (``finish``)."""

    def __init__(self) -> None:
        self.jobs: list[tuple[list[int], Any]] = []

    def __call__(self, group: str, topic: str, partition: int, letters: list[Any], done: Any) -> None:
        self.jobs.append(([d.offset for d in letters], done))

    def finish(self) -> list[int]:
        jobs, self.jobs = self.jobs, []
        for _offsets, done in jobs:
            done()
        return [o for offsets, _done in jobs for o in offsets]


def test_dead_letters_go_in_two_phases_and_a_new_leader_resumes_the_second() -> None:
    """KIP-1191 as Kafka 4.4 does it: a rejected record's ARCHIVING state is durable before its
    dead letter is handed to the queue, and it becomes ARCHIVED (the start offset moving past it)
    only once the queue has it; a node that stops in between leaves it ARCHIVING, and the next
    leader sends the dead letter again when it reads the state. A failed write sends nothing."""
    from broker.share_partitions.core.partition import ARCHIVING, REJECT

    dlq = ShareGroupSettings(limits=Limits(lock_ms=1000, delivery_limit=3, max_in_flight=100, dead_letters=True),
                             dead_letter_topic="dlq.g")
    persister, queue = ShardPersister(), Queue()
    epoch = [1]
    s = SharePartitionManager(persister, lambda group: dlq, lambda: 0, leader_epoch=lambda topic_id, index: epoch[0],
                     dead_letters=queue)
    assert ready(s)
    sp = s.partitions[KEY]
    sp.initialize(0)
    sp.acquire("m", [BatchRange(0, 3, False)], 4, 4, 0, dlq.limits)
    assert sp.acknowledge("m", 0, 1, [ACCEPT, REJECT], dlq.limits) == ErrorCode.NONE

    persister.down = True  # the write fails: nothing goes to the queue
    failed: list[bool] = []
    s.persist([KEY], failed.append)
    assert failed == [False] and queue.jobs == []
    persister.down = False
    done: list[bool] = []
    s.persist([KEY], done.append)
    assert done == [True]
    state = persister.shard.states[KEY]
    assert state.start_offset == 1 and [(b.first, b.state) for b in state.batches if b.first == 1] == [(1, ARCHIVING)]
    assert [offsets for offsets, _done in queue.jobs] == [[1]]  # handed over once durable

    # The node stops before the queue answers; the next leader reads the state and sends it again.
    epoch[0] = 2
    queue_2 = Queue()
    after = SharePartitionManager(persister, lambda group: dlq, lambda: 0, leader_epoch=lambda topic_id, index: epoch[0],
                         dead_letters=queue_2)
    assert ready(after)
    assert [offsets for offsets, _done in queue_2.jobs] == [[1]]
    assert after.partitions[KEY].records[1].state == ARCHIVING and after.partitions[KEY].start_offset == 1
    assert queue_2.finish() == [1]  # written: ARCHIVED, and that is written too
    state = persister.shard.states[KEY]
    assert state.start_offset == 2 and all(b.state != ARCHIVING for b in state.batches)
    assert after.partitions[KEY].start_offset == 2

    # The stopped node's late answer: its ARCHIVED write is fenced by the new leader's epoch, and
    # it forgets its copy.
    assert queue.finish() == [1]
    assert persister.shard.states[KEY].start_offset == 2 and KEY not in s.partitions
