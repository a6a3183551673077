"""The transaction coordinator's operations (Kafka's TransactionCoordinator).

Two protocols, chosen by each request's version as Kafka chooses: the first (transactions
version 0/1: the epoch rises at InitProducerId only; EndTxn up to v4, AddPartitionsToTxn up to v3
from clients) and the second (transactions version 2, KIP-890 part 2: EndTxn v5 bumps the epoch
of every transaction it ends, the markers carry the bumped epoch and the answer names it; the
partitions and the group's offsets partition are added by the brokers that take the producer's
records and offsets, with AddPartitionsToTxn v4+ not verify-only). When the bumped epoch would be
exhausted, the transaction goes on under a new producer id at epoch 0 once it completes. The
cluster's finalized ``transaction.version`` decides the version of the records written (1 and up:
the flexible one) and the protocol of the aborts the coordinator starts itself (a timeout, or a
new incarnation's InitProducerId fencing an open transaction).

Every operation takes ``now`` and returns a ``TxnResult``: the error to answer, the records to make
durable before answering, and the marker jobs to start once those records are durable. A change
is applied to the in-memory metadata at once and persisted by the record it emits; ``replay`` of
those records rebuilds the same metadata (restart == replay).

The two phases of ending a transaction: EndTxn writes PrepareCommit/PrepareAbort and is answered
once that is durable; the shell then writes a COMMIT/ABORT marker to every partition of the
transaction and, once all are durable, calls ``markers_written``, which writes
CompleteCommit/CompleteAbort. A transaction found in a Prepare state at load has its markers
written again (writing a marker twice is harmless).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.coordinators.transaction.core.metadata import (
    COMPLETED,
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    TWO_PHASE_TIMEOUT_MS,
    TopicPartition,
    TxnMetadata,
    TxnState,
)
from broker.runtime.timer_requests import CancelTimer, SetTimer
from protocol.errors import ErrorCode
from protocol.payloads.transaction_log_records import TransactionRecord

DEFAULT_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
DEFAULT_ID_EXPIRATION_MS = 604_800_000  # transactional.id.expiration.ms: 7 days
# Kafka removes an idle transactional id only in these states (TransactionStateManager).
_EXPIRABLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


@dataclass(frozen=True)
class MarkerJob:
    """Write a COMMIT (or ABORT) marker for ``producer_id`` at ``producer_epoch`` to each partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    # The client's transaction version (Kafka's clientTransactionVersion): which epoch rule the
    # partition checks the marker against (2: the epoch was bumped for it).
    transaction_version: int = 0


@dataclass
class TxnResult:
    error: int = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    records: list[TransactionRecord] = field(default_factory=list)
    markers: list[MarkerJob] = field(default_factory=list)
    # AddPartitionsToTxn: an error per partition when the transaction did not take them all.
    partition_errors: dict[TopicPartition, int] = field(default_factory=dict)
    timers: list[SetTimer | CancelTimer] = field(default_factory=list)

    @property
    def replies(self) -> tuple[()]:
        """None to parked requests: a transaction operation is answered from its result itself,
        once durable."""
        return ()


def _epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_PRODUCER_EPOCH


TV2 = 2  # the transaction version whose EndTxn bumps the epoch
_LAST_EPOCH = 32767  # Short.MAX_VALUE


class TransactionCoordinator:
    def __init__(self, new_producer_id: Callable[[], int], max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS,
                 id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS, transaction_version: int = TV2, *,
                 two_phase_commit: bool = False) -> None:
        """``new_producer_id()`` hands out a producer id never used before (the broker's allocator);
        ``transaction_version`` is the cluster's finalized ``transaction.version``;
        ``two_phase_commit``: ``transaction.two.phase.commit.enable`` (KIP-939 participants allowed)."""
        self.new_producer_id = new_producer_id
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.transaction_version = transaction_version
        self.two_phase_commit = two_phase_commit
        self.txns: dict[str, TxnMetadata] = {}

    # ---- persistence ------------------------------------------------------------------------

    def replay(self, record: TransactionRecord) -> None:
        if record.value is None:
            self.txns.pop(record.transactional_id, None)
            return
        loaded = TxnMetadata.from_record(record)
        old = self.txns.get(record.transactional_id)
        if old is not None and old.producer_id == loaded.producer_id:
            loaded.last_producer_epoch = old.last_producer_epoch
        self.txns[record.transactional_id] = loaded

    def _emit(self, out: TxnResult, meta: TxnMetadata) -> None:
        self.txns[meta.transactional_id] = meta
        out.records.append(meta.to_record(1 if self.transaction_version >= 1 else 0))

    def unfinished(self) -> list[MarkerJob]:
        """Marker jobs of every transaction left in a Prepare state (after a load)."""
        return [self._job(meta) for meta in self.txns.values() if meta.state in PREPARING]

    @staticmethod
    def _job(meta: TxnMetadata) -> MarkerJob:
        return MarkerJob(meta.transactional_id, meta.producer_id, meta.producer_epoch,
                         meta.state is TxnState.PREPARE_COMMIT, tuple(sorted(meta.partitions)),
                         meta.client_transaction_version)

    # ---- InitProducerId ---------------------------------------------------------------------

    def init_producer_id(self, txn_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int,
                         now: int, *, enable_two_phase: bool = False, keep_prepared: bool = False) -> TxnResult:
        """InitProducerId; ``enable_two_phase`` and ``keep_prepared`` are v6's ``Enable2Pc`` and
        ``KeepPreparedTxn`` (KIP-939), answered in Kafka 4.4's order: two-phase commit asked of a
        coordinator that does not allow it is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; keeping the
        prepared transaction is UNSUPPORTED_VERSION (Kafka 4.4 has no recovery of a prepared
        transaction by a new producer: it refuses the flag before looking at the id); a
        participant's transaction takes no timeout (any asked is accepted, TWO_PHASE_TIMEOUT_MS
        stored) and is never timed out, only ended by its producer or fenced by a new one."""
        out = TxnResult()
        if not txn_id:
            out.error = ErrorCode.INVALID_REQUEST
            return out
        if enable_two_phase and not self.two_phase_commit:
            out.error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return out
        if keep_prepared:
            out.error = ErrorCode.UNSUPPORTED_VERSION
            return out
        if enable_two_phase:
            timeout_ms = TWO_PHASE_TIMEOUT_MS
        elif not 0 < timeout_ms <= self.max_timeout_ms:
            out.error = ErrorCode.INVALID_TRANSACTION_TIMEOUT
            return out
        expected = expected_pid != NO_PRODUCER_ID or expected_epoch != NO_PRODUCER_EPOCH
        meta = self.txns.get(txn_id)
        if meta is None:
            meta = TxnMetadata(txn_id, self.new_producer_id(), timeout_ms=timeout_ms, last_update_ms=now)
        if expected and not (meta.producer_epoch == NO_PRODUCER_EPOCH or expected_pid == meta.producer_id
                             or (expected_pid == meta.previous_producer_id and _epoch_exhausted(expected_epoch))):
            out.error = ErrorCode.PRODUCER_FENCED
            return out
        if meta.state in PREPARING:
            out.error = ErrorCode.CONCURRENT_TRANSACTIONS
            return out
        if meta.state is TxnState.ONGOING:
            # A new incarnation of the producer: fence the old one (epoch + 1) and abort what it
            # left open; the caller retries once the abort has completed.
            self._fence_and_abort(out, meta, now)
            out.error = ErrorCode.CONCURRENT_TRANSACTIONS
            return out
        if _epoch_exhausted(meta.producer_epoch) and (not expected or expected_epoch == meta.producer_epoch):
            meta.previous_producer_id = meta.producer_id
            meta.producer_id = self.new_producer_id()
            meta.producer_epoch, meta.last_producer_epoch = 0, NO_PRODUCER_EPOCH
        elif not expected or expected_epoch in (NO_PRODUCER_EPOCH, meta.producer_epoch):
            meta.last_producer_epoch = meta.producer_epoch
            meta.producer_epoch = 0 if meta.producer_epoch == NO_PRODUCER_EPOCH else meta.producer_epoch + 1
        elif expected_epoch == meta.last_producer_epoch:
            pass  # a retry of the bump already made (KIP-360): answer with the current epoch
        else:
            out.error = ErrorCode.PRODUCER_FENCED
            return out
        meta.timeout_ms = timeout_ms
        meta.state = TxnState.EMPTY
        meta.partitions = set()
        meta.last_update_ms = now
        meta.start_ms = -1
        self._emit(out, meta)
        out.producer_id, out.producer_epoch = meta.producer_id, meta.producer_epoch
        return out

    def _fence_and_abort(self, out: TxnResult, meta: TxnMetadata, now: int) -> None:
        """Aborts an open transaction on the coordinator's own account, its producer fenced by one
        epoch more: a client of transactions version 2 as an EndTxn v5 abort would (the epoch
        before is remembered, so that the producer's own late abort is a retry; an exhausted epoch
        moves the transaction to a new producer id), a client of the first protocol as that
        protocol does whatever the cluster's level (Kafka applies the level to both; librdkafka,
        told its old epoch's retry of InitProducerId was good, went on and hung, docs/transactions.md)."""
        if self.transaction_version >= TV2 and meta.client_transaction_version >= TV2:
            self._prepare_end(out, meta, False, now)
            return
        if not _epoch_exhausted(meta.producer_epoch):
            meta.producer_epoch += 1
        meta.last_producer_epoch = NO_PRODUCER_EPOCH
        meta.state = TxnState.PREPARE_ABORT
        meta.client_transaction_version = 0
        meta.last_update_ms = now
        self._emit(out, meta)
        out.markers.append(self._job(meta))

    # ---- the transaction's partitions --------------------------------------------------------

    def _check_producer(self, txn_id: str, pid: int, epoch: int) -> tuple[int, TxnMetadata | None]:
        meta = self.txns.get(txn_id)
        if meta is None or meta.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, meta
        if meta.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, meta
        return ErrorCode.NONE, meta

    def add_partitions(self, txn_id: str, pid: int, epoch: int, partitions: Iterable[TopicPartition],
                       now: int, *, verify_only: bool = False, tv2: bool = False) -> TxnResult:
        """AddPartitionsToTxn (and AddOffsetsToTxn): ``verify_only``, only whether the partitions
        are in the open transaction (KIP-890 part 1); ``tv2``, added by a broker for a client of
        transactions version 2 (a transaction ending, its markers not yet written, is answered
        CONCURRENT_TRANSACTIONS before the producer is checked, as Kafka does)."""
        out = TxnResult()
        wanted = set(partitions)
        found = self.txns.get(txn_id)
        if tv2 and found is not None and found.state in PREPARING:
            out.error = ErrorCode.CONCURRENT_TRANSACTIONS
            out.partition_errors = dict.fromkeys(wanted, out.error)
            return out
        error, meta = self._check_producer(txn_id, pid, epoch)
        if not error and meta is not None and verify_only:
            for tp in wanted:
                if meta.state is not TxnState.ONGOING or tp not in meta.partitions:
                    out.partition_errors[tp] = ErrorCode.INVALID_TXN_STATE
            return out
        if not error and meta is not None and meta.state in (PREPARING | {TxnState.PREPARE_EPOCH_FENCE}):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error or meta is None:
            out.error = error
            out.partition_errors = dict.fromkeys(wanted, error)
            return out
        if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
            return out  # nothing new: nothing to write
        if meta.state is not TxnState.ONGOING:
            meta.start_ms = now
            meta.state = TxnState.ONGOING
            # A participant's transaction has no timeout; an earlier transaction's timer goes.
            out.timers.append(CancelTimer(TIMEOUT_KEY + txn_id) if meta.two_phase else timeout_timer(meta))
        meta.client_transaction_version = TV2 if tv2 else 0
        meta.partitions |= wanted
        meta.last_update_ms = now
        self._emit(out, meta)
        return out

    # ---- ending -----------------------------------------------------------------------------

    def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool, now: int, *, tv2: bool = False) -> TxnResult:
        """EndTxn; ``tv2`` (v5): the epoch bumped, and the producer id and epoch to go on with in the
        result."""
        if tv2:
            return self._end_txn_v2(txn_id, pid, epoch, commit, now)
        out = TxnResult()
        error, meta = self._check_producer(txn_id, pid, epoch)
        if error or meta is None:
            out.error = error
            return out
        state = meta.state
        if state is TxnState.ONGOING:
            meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            meta.client_transaction_version = 0
            meta.last_update_ms = now
            self._emit(out, meta)
            out.markers.append(self._job(meta))
        elif state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            pass  # a retry of an EndTxn that completed
        elif state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            out.error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            out.error = ErrorCode.INVALID_TXN_STATE
        return out

    def _end_txn_v2(self, txn_id: str, pid: int, epoch: int, commit: bool, now: int) -> TxnResult:
        """Kafka's TransactionCoordinator.endTransaction for transactions version 2: a retry is the
        epoch just before the current one (or, after the producer id moved on, the last epoch of the
        previous id); an abort may also end a transaction that has no partitions (the producer
        recovering from an error bumps its epoch that way)."""
        out = TxnResult()
        meta = self.txns.get(txn_id)
        if meta is None:
            out.error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            return out
        state = meta.state
        if state in PREPARING:
            # Its markers are being written (Kafka: a transition pending).
            out.error = ErrorCode.CONCURRENT_TRANSACTIONS
            return out
        retry_on_overflow = (meta.previous_producer_id == pid and epoch == MAX_PRODUCER_EPOCH
                             and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_epoch == epoch + 1
        if meta.producer_id != pid and not retry_on_overflow:
            out.error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
            return out
        completed = state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        if completed:
            valid = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        else:
            valid = epoch == meta.producer_epoch
        if not valid:
            out.error = ErrorCode.PRODUCER_FENCED
            return out
        if state is TxnState.ONGOING:
            self._prepare_end(out, meta, commit, now)
        elif completed and (retry_on_bump or retry_on_overflow):
            if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
                out.producer_id, out.producer_epoch = meta.producer_id, meta.producer_epoch
            else:
                out.error = ErrorCode.INVALID_TXN_STATE
        elif not commit and (state is TxnState.EMPTY or completed):
            self._prepare_end(out, meta, False, now)  # an abort with nothing added: the epoch alone moves
        else:
            out.error = ErrorCode.INVALID_TXN_STATE
        return out

    def _prepare_end(self, out: TxnResult, meta: TxnMetadata, commit: bool, now: int) -> None:
        """PrepareCommit/PrepareAbort under transactions version 2: one epoch more (the markers carry
        it), and a new producer id when that epoch is the last one; the result names the producer
        id and epoch the producer goes on with."""
        if _epoch_exhausted(meta.producer_epoch):
            meta.next_producer_id = self.new_producer_id()
        if not meta.partitions:
            meta.start_ms = now
        meta.last_producer_epoch = meta.producer_epoch
        if meta.producer_epoch < _LAST_EPOCH:
            meta.producer_epoch += 1
        # else (an abort at the very last epoch, which only a producer id that could not move on
        # reaches): not bumped, so that it can still end; the new producer id takes over after it.
        meta.previous_producer_id = meta.producer_id
        meta.client_transaction_version = TV2
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        meta.last_update_ms = now
        self._emit(out, meta)
        out.markers.append(self._job(meta))
        if meta.next_producer_id != NO_PRODUCER_ID:
            out.producer_id, out.producer_epoch = meta.next_producer_id, 0
        else:
            out.producer_id, out.producer_epoch = meta.producer_id, meta.producer_epoch

    def markers_written(self, job: MarkerJob, now: int) -> TxnResult:
        """Every marker of ``job`` is durable: the transaction completes."""
        out = TxnResult()
        meta = self.txns.get(job.transactional_id)
        expected = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if (meta is None or meta.state is not expected or meta.producer_id != job.producer_id
                or meta.producer_epoch != job.producer_epoch):
            return out  # already completed (markers written twice after a load)
        meta.state = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        meta.partitions = set()
        meta.last_update_ms = now
        if meta.client_transaction_version >= TV2 and meta.next_producer_id != NO_PRODUCER_ID:
            # The bumped epoch was the last one: the transaction's producer goes on as a new id.
            meta.previous_producer_id, meta.producer_id = meta.producer_id, meta.next_producer_id
            meta.producer_epoch = 0
        meta.next_producer_id = NO_PRODUCER_ID
        self._emit(out, meta)
        return out

    def timeout_timers(self) -> list[SetTimer]:
        """A timer per open transaction, due at its start plus its timeout (after a load: the
        transactions the log left open)."""
        return [timeout_timer(meta) for meta in self.txns.values()
                if meta.state is TxnState.ONGOING and not meta.two_phase]

    def time_out(self, txn_id: str, now: int) -> TxnResult:
        """A transaction's timeout timer fired: if it is still open it is aborted, its producer
        fenced (Kafka's abortTimedOutTransactions). The timer was armed when the transaction
        began and elapsed on the steady clock, so a wall clock stepped ahead aborts nothing early
        (Kafka compares wall-clock times and would abort every open transaction at once). A
        two-phase commit participant's transaction is never timed out (KIP-939)."""
        out = TxnResult()
        meta = self.txns.get(txn_id)
        if meta is not None and meta.state is TxnState.ONGOING and not meta.two_phase:
            self._fence_and_abort(out, meta, now)
        return out

    def expire_transactional_ids(self, now: int) -> TxnResult:
        """Forgets every transactional id with no transaction open whose last change is
        ``transactional.id.expiration.ms`` old, with a tombstone each (Kafka's
        removeExpiredTransactionalIds): its producer id and epoch go, and the next InitProducerId
        for it starts afresh with a new producer id."""
        out = TxnResult()
        for meta in list(self.txns.values()):
            if meta.state in _EXPIRABLE and meta.last_update_ms <= now - self.id_expiration_ms:
                del self.txns[meta.transactional_id]
                out.records.append(TransactionRecord(meta.transactional_id, None))
        return out

    # ---- admin ------------------------------------------------------------------------------

    def listed(self, states: set[str], producer_ids: set[int], min_duration_ms: int,
               now: int) -> list[TxnMetadata]:
        out = []
        for meta in self.txns.values():
            if states and meta.state.kafka_name not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state in COMPLETED or now - meta.start_ms <= min_duration_ms):
                continue
            out.append(meta)
        return sorted(out, key=lambda m: m.transactional_id)


TIMEOUT_KEY = "transaction-timeout/"


def timeout_timer(meta: TxnMetadata) -> SetTimer:
    """The timer that aborts ``meta``'s transaction at its timeout (one key per transactional id:
    the next transaction's replaces it)."""
    return SetTimer(TIMEOUT_KEY + meta.transactional_id, meta.start_ms + meta.timeout_ms)
