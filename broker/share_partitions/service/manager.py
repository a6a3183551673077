"""Share partitions on this node: their state in memory, made durable through the share coordinator.

Every share partition (group, topic id, partition) is a pure ``SharePartition``, kept by the node
that leads its topic partition. Its durable state is the share coordinator's
(``broker.coordinators.share.service.coordinator``, on the coordinator runtime), reached through a ``Persister``: the
local coordinator on a single broker, the node coordinating the key's ``__share_group_state``
partition in a cluster. A share partition's first use reads its state (ReadShareGroupState;
``prepare``); one never written starts where its group's reset says at its first fetch and is
initialized (InitializeShareGroupState, at a state epoch above any earlier one) before its first
write. A change that must survive a crash (an acknowledgement, a release, the start offset set by
a first fetch, an offset reset) is written (WriteShareGroupState: its start offset and in-flight
batches, acquired records as available), and the request that made it is answered only once that
write is durable. Acquisitions are not written: after a restart an acquired record is available
again.

Records archived at the delivery limit and acquisition locks that expired go to the rebalance
journal as events of the share group (``journal``, the journal writer's ``write``: it only queues),
one per share partition and round: after each fetch or acknowledgement round (when its changes are
written), each expiry pass and each release of a gone member's records.

Records a group with a dead-letter queue archives (rejected, or at the delivery limit) go in Kafka
4.4's two phases (KIP-1191): their ARCHIVING state is written first; once that is durable their
dead letters go to the queue (``dead_letters``), and once the queue has them (or they are given
up) they become ARCHIVED, written like any change. A share partition read back with records still
ARCHIVING (its node stopped between the phases) sends their dead letters at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import trio

from broker.coordinators.share.core.state import ShareGroupOffset
from broker.coordinators.share.service.coordinator import Deliver, ShareCoordinatorService, StateRequest
from broker.runtime.countdown import Countdown
from broker.share_partitions.core import records as state_records
from broker.share_partitions.core.journal import delivery_events
from broker.share_partitions.core.partition import ACQUIRED, DeadLetter, InFlight, Limits, SharePartition
from broker.share_partitions.core.settings import ShareGroupSettings
from broker.topics.changes import TopicChange, TopicDeleted
from protocol.errors import ErrorCode
from protocol.group_events import GroupEvent
from protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from protocol.messages.write_share_group_state import WriteShareGroupStateRequest

Key = tuple[str, bytes, int]  # group, topic id, partition
# How often acquisition locks and idle sessions are checked while any may expire: a lock is
# released at most this late.
LOCK_CHECK_SECONDS = 0.1
Done = Callable[[bool], None]
Journal = Callable[[Sequence[GroupEvent]], None]
# A share group's (epoch, state) where this node coordinates it, else None.
GroupInfo = Callable[[str], "tuple[int, str] | None"]
# (group, topic name, partition, dead letters, done()): the dead-letter queue writer; ``done`` is
# called once they are written or given up.
DeadLetterSink = Callable[[str, str, int, "list[DeadLetter]", Callable[[], None]], None]


class Persister(Protocol):
    """Where share partitions' state is read and written: ``deliver(response)`` once durable,
    ``deliver(None)`` when the coordinator could not be reached or does not serve the key."""

    def send(self, request: StateRequest, deliver: Deliver) -> None: ...


@dataclass
class ShareSession:
    epoch: int
    partitions: set[tuple[bytes, int]]
    last_used_ms: int = 0
    # The connection that opened it: the session ends when that connection closes (Kafka 4.4's
    # share session cache does the same); -1 when not known.
    conn_id: int = -1


def _error(response: Any) -> int:
    """The one partition's error of a single-key state response (None: not reached)."""
    if response is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return int(response.results[0].partitions[0].error_code)


def from_state(start_offset: int, batches: list[Any]) -> SharePartition:
    """A share partition from its durable state: acquired records were written available."""
    sp = SharePartition(start_offset=start_offset, next_offset=start_offset)
    for b in batches:
        for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
            sp.records[offset] = InFlight(b.delivery_state, b.delivery_count)
        sp.next_offset = max(sp.next_offset, b.last_offset + 1)
    sp.advance()
    return sp


def _from_offset(state: ShareGroupOffset) -> SharePartition:
    W = WriteShareGroupStateRequest.WriteStateData.PartitionData.StateBatch
    return from_state(state.start_offset, [W(first_offset=b.first, last_offset=b.last, delivery_state=b.state,
                                             delivery_count=b.deliveries) for b in state.batches])


class SharePartitionManager:
    def __init__(self, persister: Persister, settings: Callable[[str], ShareGroupSettings],
                 clock: Callable[[], int], max_sessions: int = 2000, session_idle_ms: int = 45000,
                 local: ShareCoordinatorService | None = None,
                 leader_epoch: Callable[[bytes, int], int | None] = lambda topic_id, index: -1,
                 reread_at_session_open: bool = False,
                 group_partitions: Callable[[bytes], list[Key]] = lambda topic_id: [],
                 journal: Journal | None = None,
                 group_info: GroupInfo = lambda group: None,
                 topic_name: Callable[[bytes], str | None] = lambda topic_id: None,
                 steady: Callable[[], int] | None = None,
                 dead_letters: DeadLetterSink | None = None) -> None:
        """``clock`` is the wall clock (what is written down); acquisition locks and idle sessions
        are timed on ``steady`` (by default ``clock``), so that a stepped wall clock neither expires
        every lock at once (each expiry counts a delivery: records would be archived unread) nor
        keeps a gone consumer's records locked that much longer. ``settings`` gives a group's effective share settings (its group configs over the
        broker's ``group.share.*``), looked up at each use so that a change applies at once.
        ``local``: the share coordinator of this node (what it coordinates is listed from it).
        ``leader_epoch(topic id, partition)``: the epoch this node leads the topic partition at
        (-1: no fencing), None when it does not lead it. ``reread_at_session_open`` (a cluster):
        a member's new session has the group's idle share partitions read again, as another node
        may have reset their offsets meanwhile. ``group_partitions(topic id)``: the share
        partitions of that topic the share groups this node coordinates initialized (their state
        may be coordinated by any node), deleted with the topic. ``journal``: where delivery
        trouble is reported (none: it is only counted), with the group's epoch and state from
        ``group_info`` and the topic's name from ``topic_name``. ``dead_letters(group, topic,
        partition, letters, done)``: where the records a group with a dead-letter queue archived
        (rejected, or at the delivery limit) go once their ARCHIVING state is durable
        (``broker.share_partitions.service.dead_letters``)."""
        self.dead_letters = dead_letters
        self.reread_at_session_open = reread_at_session_open
        self.group_partitions = group_partitions
        self.journal = journal
        self.group_info = group_info
        self.topic_name = topic_name
        self.max_sessions = max_sessions
        # A session unused this long belongs to a consumer that is gone (one that polls fetches
        # far more often): it is closed and what its member holds is released.
        self.session_idle_ms = session_idle_ms
        self.persister = persister
        self.local = local
        self.settings = settings
        self.clock = clock
        self.steady = clock if steady is None else steady
        self.partitions: dict[Key, SharePartition] = {}
        self.leader_epoch = leader_epoch
        # The leader epoch each share partition in memory was read at: once this node leads its
        # topic partition at another epoch (it lost and regained it), the state is read again.
        self.read_at: dict[Key, int] = {}
        # The state epoch each share partition's coordinator state has; a key missing here is
        # initialized (at a higher state epoch than any before) at its next write.
        self.state_epochs: dict[Key, int] = {}
        # Reads of share partitions' state in flight, and who waits for each.
        self.reading: dict[Key, list[Done]] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # Parked ShareFetches, woken when records may have become available other than by an
        # append (a lock expired, a member released or acknowledged records, a session or a share
        # partition went): appends wake them through their log's watchers.
        self.watchers: set[trio.Event] = set()
        self._opened = trio.Event()
        if local is not None:
            # State deleted at this node's coordinator (by whichever node asked): a copy held
            # here is stale, and the next use reads the key again (and finds it never written).
            local.on_deleted.append(self._drop)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if not self.sessions and not any(sp.next_deadline() is not None for sp in self.partitions.values()):
                # Nothing can expire: sleep until a consumer opens a share session (a broker
                # without share consumers does not wake up for them).
                self._opened = trio.Event()
                await self._opened.wait()
            await trio.sleep(LOCK_CHECK_SECONDS)
            now = self.steady()
            self.expire_locks(now)
            self.close_idle_sessions(now)

    # ---- state --------------------------------------------------------------------------------

    def limits(self, group: str) -> Limits:
        return self.settings(group).limits

    def prepare(self, keys: list[Key], done: Done) -> None:
        """Reads the state of each share partition not in memory yet; ``done(True)`` once all are
        (a key whose state could not be read stays out of ``partitions``: ``done(False)``)."""
        missing = []
        for key in dict.fromkeys(keys):
            epoch = self.leader_epoch(key[1], key[2])
            if epoch is None:
                self._drop(key)  # another node leads it: its share partition lives there
            elif self.read_at.get(key) != epoch:
                self._drop(key)
                missing.append(key)
            elif key not in self.partitions:
                missing.append(key)
        if not missing:
            done(True)
            return
        countdown = Countdown(len(missing), done)
        for key in missing:
            waiting = self.reading.get(key)
            if waiting is not None:
                waiting.append(countdown.arrive)
                continue
            self.reading[key] = [countdown.arrive]
            D = ReadShareGroupStateRequest.ReadStateData
            epoch = self.leader_epoch(key[1], key[2])
            self.persister.send(ReadShareGroupStateRequest(group_id=key[0], topics=[D(topic_id=key[1], partitions=[
                D.PartitionData(partition=key[2], leader_epoch=-1 if epoch is None else epoch)])]),
                partial(self._read, key, -1 if epoch is None else epoch))

    def session_opened(self, group: str) -> None:
        """A member of ``group`` opened a share session: in a cluster, the group's share partitions
        with nothing acquired and nothing left to write are read again at their next use. Locks and
        idle sessions are watched from now on."""
        self._opened.set()
        if not self.reread_at_session_open:
            return
        for key, sp in list(self.partitions.items()):
            if key[0] == group and key not in self.reading and not sp.changed \
                    and not any(r.state == ACQUIRED for r in sp.records.values()):
                self._drop(key)

    def wake(self) -> None:
        """Something a parked ShareFetch may be waiting for has changed: it looks again."""
        for event in self.watchers:
            event.set()
        self.watchers.clear()

    def _drop(self, key: Key) -> None:
        self.partitions.pop(key, None)
        self.state_epochs.pop(key, None)
        self.read_at.pop(key, None)
        self.wake()

    def _read(self, key: Key, epoch: int, response: Any) -> None:
        error = _error(response)
        ok = error in (ErrorCode.NONE, ErrorCode.INVALID_REQUEST)
        if key not in self.partitions:  # else reset or created meanwhile: that state is newer
            if ok:
                self.read_at[key] = epoch
            if error == ErrorCode.NONE:
                part = response.results[0].partitions[0]
                sp = self.partitions[key] = from_state(part.start_offset, part.state_batches)
                self.state_epochs[key] = part.state_epoch
                # Records left ARCHIVING by a node that stopped between the two phases: their
                # state is durable, so their dead letters go now (at least once, never lost).
                sp.resume_archiving(self.limits(key[0]).delivery_limit)
                if sp.dead_letters:
                    self._send_dead_letters(key, sp, sp.take_dead_letters())
            elif error == ErrorCode.INVALID_REQUEST:
                # Never initialized: the share partition starts at its first fetch.
                self.partitions[key] = SharePartition()
        for waiter in self.reading.pop(key, []):
            waiter(ok)

    def get(self, key: Key) -> SharePartition:
        """The share partition (``prepare`` read its state already)."""
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition()
        return sp

    def expire_locks(self, now_ms: int) -> None:
        expired = []
        for key, sp in self.partitions.items():
            deadline = sp.next_deadline()
            if deadline is not None and deadline <= now_ms:
                sp.expire(now_ms, self.limits(key[0]))
                expired.append(key)
        if expired:
            self.wake()
        self._settle(expired)

    def close_idle_sessions(self, now_ms: int) -> None:
        idle = [key for key, session in self.sessions.items() if now_ms - session.last_used_ms > self.session_idle_ms]
        released: list[Key] = []
        for group, member in idle:
            del self.sessions[(group, member)]
            released += self.release_member(group, member)
        if idle:
            self.wake()
        self._settle(released)

    def _settle(self, keys: list[Key]) -> None:
        """After an expiry or release round: its trouble to the journal, and the share partitions
        that archived records for a dead-letter queue written (which sends the dead letters)."""
        pending = [k for k in dict.fromkeys(keys) if k in self.partitions and self.partitions[k].dead_letters]
        self.report([k for k in keys if k not in pending])
        if pending:
            self.persist(pending, lambda ok: None)

    def report(self, keys: list[Key]) -> None:
        """Hands the delivery trouble of the share partitions of ``keys`` to the journal: one or
        two events per share partition for the whole round."""
        events: list[GroupEvent] = []
        now = -1
        for key in dict.fromkeys(keys):
            sp = self.partitions.get(key)
            trouble = None if sp is None else sp.take_trouble()
            if trouble is None or self.journal is None:
                continue
            if now < 0:
                now = self.clock()
            info = self.group_info(key[0])
            epoch, state = info if info is not None else (-1, "Unknown")
            events += delivery_events(key[0], self.topic_name(key[1]) or key[1].hex(), key[2], trouble,
                                      self.limits(key[0]), now, epoch, state)
        if events and self.journal is not None:
            self.journal(events)

    def close_sessions_of(self, conn_id: int) -> None:
        """A client connection closed: the share sessions it opened end, and what their members
        hold is available again at once (written like any release)."""
        ended = [key for key, session in self.sessions.items() if session.conn_id == conn_id]
        changed: list[Key] = []
        for group, member in ended:
            del self.sessions[(group, member)]
            changed += self.release_member(group, member)
        if ended:
            self.wake()
        if changed:
            self.persist(changed, lambda ok: None)

    def release_member(self, group: str, member: str) -> list[Key]:
        """The member's session ended: whatever it holds in the group's share partitions goes back."""
        limits = self.limits(group)
        released = [key for key, sp in self.partitions.items() if key[0] == group and sp.release_member(member, limits)]
        if released:
            self.wake()
        return released

    # ---- durability ---------------------------------------------------------------------------

    def persist(self, keys: list[Key], done: Done) -> None:
        """Writes each share partition's state; ``done(ok)`` once all are durable. The round's
        delivery trouble goes to the journal first."""
        self.report(keys)
        todo = [k for k in dict.fromkeys(keys) if k in self.partitions and self.partitions[k].initialized]
        if not todo:
            done(True)
            return
        countdown = Countdown(len(todo), done)
        for key in todo:
            sp = self.partitions[key]
            letters = sp.take_dead_letters()  # their ARCHIVING state is in this write

            def written(ok: bool, key: Key = key, sp: SharePartition = sp, letters: list[DeadLetter] = letters) -> None:
                if letters:
                    if ok:
                        self._send_dead_letters(key, sp, letters)
                    elif sp is self.partitions.get(key):
                        sp.dead_letters[:0] = letters  # sent after the next write that succeeds
                countdown.arrive(ok)

            if key in self.state_epochs:
                self._write(key, written)
            else:
                self._initialize(key, written)

    def _send_dead_letters(self, key: Key, sp: SharePartition, letters: list[DeadLetter]) -> None:
        """The dead letters of records whose ARCHIVING state is durable go to the queue; then they
        are ARCHIVED (written with the share partition's next write, started here)."""
        offsets = [d.offset for d in letters]

        def sent() -> None:
            if sp is self.partitions.get(key) and sp.archive(offsets):
                self.persist([key], lambda ok: None)

        if self.dead_letters is None:
            sent()
        else:
            self.dead_letters(key[0], self.topic_name(key[1]) or key[1].hex(), key[2], letters, sent)

    def _write(self, key: Key, done: Done, everything: bool = False) -> None:
        """Writes what changed since the last write (every record in flight when ``everything``):
        the start offset and those records' batches, as a ShareUpdate carries them."""
        sp = self.partitions.get(key)
        if sp is None:
            done(True)  # forgotten meanwhile
            return
        D = WriteShareGroupStateRequest.WriteStateData
        P = D.PartitionData
        changed, sp.changed = sp.changed, set()
        batches = state_records.state_batches(sp, None if everything else changed, P.StateBatch)
        if everything and not batches:
            done(True)  # the initialization wrote the start offset: nothing more to say
            return
        request = WriteShareGroupStateRequest(group_id=key[0], topics=[D(topic_id=key[1], partitions=[P(
            partition=key[2], state_epoch=self.state_epochs.get(key, -1), leader_epoch=self.read_at.get(key, -1),
            start_offset=sp.start_offset, state_batches=batches)])])

        def written(response: Any) -> None:
            error = _error(response)
            if error != ErrorCode.NONE and sp is self.partitions.get(key):
                sp.changed |= changed  # written again with the next change
            if error == ErrorCode.INVALID_REQUEST and sp is self.partitions.get(key):
                # The coordinator has no state for it: deleted meanwhile (its group or topic was
                # deleted, or its offsets), so what is in memory is forgotten, never written
                # back; the next use reads it again and starts where its group's reset says.
                self._drop(key)
            elif error in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH) \
                    and sp is self.partitions.get(key):
                # Its offsets were reset, or a later leader wrote it: what is in memory is stale,
                # and is read again at the next use.
                self._drop(key)
            done(error == ErrorCode.NONE)

        self.persister.send(request, written)

    def _initialize(self, key: Key, done: Done) -> None:
        """The share partition's state starts afresh at its start offset, at a state epoch above
        the coordinator's (read first), then its batches are written."""
        D = ReadShareGroupStateSummaryRequest.ReadStateSummaryData

        def summary(response: Any) -> None:
            if _error(response) != ErrorCode.NONE:
                done(False)
                return
            sp = self.partitions.get(key)
            if sp is None:
                done(True)
                return
            epoch = response.results[0].partitions[0].state_epoch + 1
            self.state_epochs[key] = epoch
            I = InitializeShareGroupStateRequest.InitializeStateData  # noqa: E741
            self.persister.send(InitializeShareGroupStateRequest(group_id=key[0], topics=[I(
                topic_id=key[1], partitions=[I.PartitionData(partition=key[2], state_epoch=epoch,
                                                             start_offset=sp.start_offset)])]), initialized)

        def initialized(response: Any) -> None:
            if _error(response) != ErrorCode.NONE:
                self.state_epochs.pop(key, None)
                done(False)
                return
            self._write(key, done, everything=True)

        self.persister.send(ReadShareGroupStateSummaryRequest(group_id=key[0], topics=[D(
            topic_id=key[1], partitions=[D.PartitionData(partition=key[2], leader_epoch=-1)])]), summary)

    # ---- administration -----------------------------------------------------------------------

    def gather(self, keys: list[Key], done: Callable[[dict[Key, SharePartition]], None]) -> None:
        """The share partitions of ``keys`` not in memory, as their share coordinator holds them
        (read without a leader epoch: nothing is fenced); those never written are left out."""
        found: dict[Key, SharePartition] = {}
        keys = [k for k in dict.fromkeys(keys) if k not in self.partitions]
        if not keys:
            done(found)
            return
        countdown = Countdown(len(keys), lambda ok: done(found))
        for key in keys:
            def read(response: Any, key: Key = key) -> None:
                if _error(response) == ErrorCode.NONE:
                    part = response.results[0].partitions[0]
                    found[key] = from_state(part.start_offset, part.state_batches)
                countdown.arrive()

            D = ReadShareGroupStateRequest.ReadStateData
            self.persister.send(ReadShareGroupStateRequest(group_id=key[0], topics=[D(topic_id=key[1], partitions=[
                D.PartitionData(partition=key[2], leader_epoch=-1)])]), read)

    def drop_unled(self, keys: list[Key]) -> None:
        """Forgets the share partitions of ``keys`` whose topic partition another node leads (an
        offset reset written from here): their leader reads them again."""
        for key in keys:
            if self.leader_epoch(key[1], key[2]) is None:
                self._drop(key)

    def of_group(self, group: str) -> dict[tuple[bytes, int], SharePartition]:
        """The group's share partitions: those in memory, and those the local coordinator holds."""
        out: dict[tuple[bytes, int], SharePartition] = {}
        if self.local is not None:
            out = {(k[1], k[2]): _from_offset(state) for k, state in self.local.states(group).items()}
        out.update({(k[1], k[2]): sp for k, sp in self.partitions.items() if k[0] == group})
        return out

    def reset(self, key: Key, offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts again at ``offset``, nothing in flight
        (written at a new state epoch by the next ``persist``)."""
        self._drop(key)
        sp = self.partitions[key] = SharePartition()
        sp.initialize(offset)
        epoch = self.leader_epoch(key[1], key[2])
        self.read_at[key] = -1 if epoch is None else epoch

    def forget(self, keys: list[Key], done: Done) -> None:
        """DeleteShareGroupOffsets, DeleteGroups: the share partitions' state goes."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            done(True)
            return
        countdown = Countdown(len(keys), done)
        for key in keys:
            self._drop(key)
            D = DeleteShareGroupStateRequest.DeleteStateData
            self.persister.send(DeleteShareGroupStateRequest(group_id=key[0], topics=[D(
                topic_id=key[1], partitions=[D.PartitionData(partition=key[2])])]),
                lambda r: countdown.arrive(_error(r) == ErrorCode.NONE))

    def _known(self) -> list[Key]:
        keys = list(self.partitions)
        if self.local is not None:
            keys += [k for k in self.local.states() if k not in self.partitions]
        return keys

    def on_topic_change(self, change: TopicChange, settlement: Countdown) -> None:
        """Subscribed to the broker's topic changes: a deleted topic's share partitions are
        forgotten, their state deleted wherever it is coordinated: those this node holds or
        coordinates, and every one the share groups it coordinates initialized (as Kafka's group
        coordinator deletes them through its persister). DeleteTopics settles once that is durable."""
        if not isinstance(change, TopicDeleted):
            return
        release = settlement.hold()
        keys = [key for key in self._known() if key[1] == change.topic_id] + self.group_partitions(change.topic_id)
        self.forget(keys, lambda ok: release())

    def forget_group(self, group: str, keys: list[Key], done: Done) -> None:
        """DeleteGroups, before it deletes the share group: the state of ``keys`` (the share
        partitions the group initialized) and of the group's share partitions this node holds or
        coordinates is deleted where it is coordinated; ``done(ok)`` once that is durable."""
        self.forget(keys + [key for key in self._known() if key[0] == group], done)
