"""Produce: validate each partition's record batch, check idempotent sequences, append, and answer
once the writes are durable (``log.flush.policy``).

Versions 0-2 (which Kafka 4 no longer serves) carry message sets of the old formats: they are
up-converted to one record batch and then checked and stored like any other (a v0-2 request that
already carries a record batch is taken as it is, as Kafka did). ``acks`` 0, 1 and -1: with one
replica 1 and -1 mean the same; acks=0 gets no response, and a connection whose acks=0 produce
failed is closed (Kafka's way of telling such a producer).

In a cluster, a node names itself a partition's leader as soon as it claims it, and opens its log
after: a produce request for a partition still opening waits until the log serves (or the opening
is given up), and the requests of a connection keep their order meanwhile (``OpeningHold``).
Answering NOT_LEADER_OR_FOLLOWER in that window would reject a request whose successor, pipelined
behind it, lands once the log serves; an idempotent librdkafka producer takes the sequence gap
that follows (OUT_OF_ORDER_SEQUENCE_NUMBER) as skipped sequences and bumps its epoch on every
partition, re-sending under the new epoch records it had possibly written (duplicates).

Transactional batches are stored like any other; each one opens (or extends) its producer's
transaction on the partition, which holds the partition's last stable offset back until the
transaction coordinator's marker is durable (``broker.topics.partition_txns``). An older epoch of
a transactional producer, fenced by a newer one or by the coordinator, gets INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import struct
import time
from collections import deque
from collections.abc import Callable

from crc32c import crc32c

from broker.cluster.node import ClusterNode
from broker.cluster.peers import PeerClient
from broker.coordinators.transaction.service.coordinator import TransactionCoordinatorService
from broker.coordinators.transaction.service.verification import PRODUCE_TV2_VERSION, RemoteVerification
from broker.handlers.produce_refusals import RefusedBatches, Sequence, batch_sequence
from broker.log_runtime.runtime import BatchWrite
from broker.network.router import Request
from broker.runtime.countdown import Countdown
from broker.topics.catalog import Topic, TopicCatalog
from broker.topics.partitions import PartitionState, TopicLogs
from broker.topics.producer_state import last_sequence
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    CorruptBatchError,
    RecordBatch,
    decode_records,
    iter_batches,
)
from protocol.record_compression import CompressionUnavailableError
from protocol.record_conversion import is_message_set, up_convert
from storage.errors import FencedError, StorageError

PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_MAX_TIMESTAMP_OFFSET = 35
_CORRUPT_KINDS = {"crc", "length", "compression"}


class Rejected(Exception):
    def __init__(self, error_code: int, message: str, log_start_offset: int = -1,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        # Kafka answers the log's start offset with the errors its log raised while appending (a
        # producer's sequence or epoch refused, a record invalid), -1 with those found before.
        self.log_start_offset = log_start_offset
        # (index in the batch, message) of each invalid record, as Kafka lists them.
        self.record_errors = record_errors or []


def inspect_batch(raw: bytes | None, max_message_bytes: int) -> RecordBatch:
    """The single, whole, CRC-valid magic-2 batch a v3+ produce carries per partition, with the
    checks Kafka's LogValidator makes on a client's batch header; raises ``Rejected``."""
    if not raw:
        raise Rejected(ErrorCode.INVALID_RECORD, "Produce requests must have exactly one record batch per partition")
    batches = []
    try:
        for batch in iter_batches(raw, verify_crc=False):
            batches.append(batch)
            if len(batches) > 1:
                raise Rejected(ErrorCode.INVALID_RECORD,
                               "Produce requests must have exactly one record batch per partition")
            if batch.size > max_message_bytes:
                raise Rejected(ErrorCode.MESSAGE_TOO_LARGE,
                               f"The record batch is {batch.size} bytes, larger than max.message.bytes "
                               f"({max_message_bytes})")
            if not batch.crc_ok():
                raise CorruptBatchError("CRC-32C mismatch", batch.position, "crc")
    except CorruptBatchError as exc:
        code = ErrorCode.CORRUPT_MESSAGE if exc.kind in _CORRUPT_KINDS else ErrorCode.INVALID_RECORD
        raise Rejected(code, f"invalid record batch: {exc.reason}") from None
    batch = batches[0]
    count = batch.records_count
    if count <= 0 or count != batch.last_offset_delta + 1:
        raise Rejected(ErrorCode.INVALID_RECORD,
                       f"record count {count} does not match last offset delta {batch.last_offset_delta}")
    if batch.is_control:
        raise Rejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise Rejected(ErrorCode.INVALID_RECORD, f"Invalid sequence number {batch.base_sequence}")
    return batch


def from_old_producer(raw: bytes | None) -> bytes | None:
    """What a Produce v0-2 carries, as a record batch; raises ``Rejected``."""
    if not raw or not is_message_set(raw):
        return raw
    try:
        return up_convert(raw)
    except CompressionUnavailableError as exc:
        raise Rejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, exc.reason) from None
    except CorruptBatchError as exc:
        code = ErrorCode.CORRUPT_MESSAGE if exc.kind in _CORRUPT_KINDS else ErrorCode.INVALID_RECORD
        raise Rejected(code, f"invalid message set: {exc.reason}") from None


def stamp_log_append_time(raw: bytes, now_ms: int) -> bytes:
    """message.timestamp.type=LogAppendTime: mark the batch and set its max timestamp to now
    (Kafka changes only the header for v2 batches), then fix the CRC."""
    out = bytearray(raw)
    (attributes,) = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", out, _MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _check_keys(batch: RecordBatch, topic: str, partition: int) -> None:
    try:
        records = decode_records(batch)
    except CorruptBatchError as exc:
        raise Rejected(ErrorCode.INVALID_RECORD, f"invalid record batch: {exc.reason}") from None
    keyless = [i for i, r in enumerate(records) if r.key is None]
    if keyless:
        message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
        raise Rejected(ErrorCode.INVALID_RECORD, message, record_errors=[(i, message) for i in keyless])


# What a failed check that a partition is in its transaction answers (Kafka's ReplicaManager):
# the coordinator not able to tell yet is retriable, the rest as the coordinator said.
_VERIFY_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                               ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})

# (topic, partition, producer id, producer epoch) -> error code: is the partition in the
# producer's open transaction?
TxnVerifier = Callable[[str, int, int, int], int]


def _verify_transaction(verify: TxnVerifier, state: PartitionState, producer_id: int, epoch: int,
                        tv2: bool = False) -> None:
    """``tv2``: the answer of an add for a client of transactions version 2, which is told
    CONCURRENT_TRANSACTIONS as it is (its transaction is still ending), as Kafka tells it."""
    code = verify(state.topic, state.partition, producer_id, epoch)
    if tv2 and code == ErrorCode.CONCURRENT_TRANSACTIONS:
        raise Rejected(code, "The producer's previous transaction is still ending")
    if code == ErrorCode.INVALID_TXN_STATE:
        raise Rejected(code, "Partition was not added to the transaction")
    if code in _VERIFY_RETRIABLE:
        raise Rejected(ErrorCode.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
                       "transaction. Underlying error: " + ErrorCode(code).name)
    if code == ErrorCode.PRODUCER_FENCED:
        # Kafka's verification answers a fenced epoch as INVALID_PRODUCER_EPOCH.
        raise Rejected(ErrorCode.INVALID_PRODUCER_EPOCH, "Producer epoch is fenced")
    if code:
        raise Rejected(code, ErrorCode(code).name)


def submit(topic_logs: TopicLogs, state: PartitionState, records: bytes | None, resp: PartitionResponse,
           on_done: Callable[[], None], verify: TxnVerifier | None = None, tv2: bool = False) -> BatchWrite | int | None:
    """Validates one partition's batch and queues it, filling ``resp`` as far as known now.
    Returns the queued ``BatchWrite``; for a duplicate, the last offset of the original (whose
    durability the answer waits for); None when there is nothing to wait for.

    ``verify`` (KIP-890 part 1, ``transaction.partition.verification.enable``): the first
    transactional batch of a producer's transaction on this partition is taken only if the
    transaction coordinator has the partition in that transaction; a batch that a hanging
    transaction would otherwise leave open for ever (sent after its transaction ended, or never
    added) is refused. ``tv2``: ``verify`` answers what adding the partition to the transaction
    answered (transactions version 2: Produce v12 and up)."""
    if state.deleted:
        raise Rejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the partition was deleted")
    if state.part.failed or state.part.closed:
        # Its log failed (a write refused, the fence found lapsed) and is being reopened: what the
        # producer state says until then is a guess (the failed write may be in the files or not),
        # so no sequence is judged against it. A retriable error keeps the producer's sequences as
        # they are; OUT_OF_ORDER_SEQUENCE_NUMBER here would make librdkafka bump its epoch and send
        # again, under new sequences, records the failed write may have stored.
        raise Rejected(ErrorCode.KAFKA_STORAGE_ERROR, "the partition's log failed and is being reopened")
    batch = inspect_batch(records, state.max_message_bytes)
    raw = records
    assert raw is not None  # inspect_batch refuses a partition without records
    log = state.log
    if log.config.compact:
        try:
            _check_keys(batch, state.topic, state.partition)
        except Rejected as exc:
            exc.log_start_offset = log.log_start_offset
            raise
    pid = batch.producer_id
    first_seq = batch.base_sequence
    last_seq = last_sequence(first_seq, batch.last_offset_delta)
    if pid >= 0:
        check = state.producers.check(pid, batch.producer_epoch, first_seq, last_seq)
        if check.error_code:
            if batch.is_transactional and verify is not None and pid not in state.txns.ongoing:
                # Kafka verifies with the transaction coordinator before its log checks the
                # producer's epoch and sequence: a refusal there comes first.
                _verify_transaction(verify, state, pid, batch.producer_epoch, tv2)
            raise Rejected(check.error_code, check.message or "", log.log_start_offset)
        if check.duplicate is not None:
            resp.base_offset = check.duplicate.first_offset
            # Kafka answers a duplicate with the original batch's timestamp as its append time.
            resp.log_append_time_ms = check.duplicate.timestamp
            resp.log_start_offset = log.log_start_offset
            last = check.duplicate.last_offset
            return last if last >= state.high_watermark else None
        if batch.is_transactional and verify is not None and pid not in state.txns.ongoing:
            _verify_transaction(verify, state, pid, batch.producer_epoch, tv2)
    max_timestamp = batch.max_timestamp  # what the log keeps: the append time on such topics
    if state.log_append_time:
        now = int(time.time() * 1000)
        raw = stamp_log_append_time(raw, now)
        resp.log_append_time_ms = now
        max_timestamp = now
    first = state.next_offset
    last = first + batch.last_offset_delta
    state.next_offset = last + 1
    if pid >= 0:
        # Noted now, with the offsets the batch will get, so a retry arriving while it is still
        # queued is already recognised.
        state.producers.record(pid, batch.producer_epoch, first_seq, last_seq, first, last, max_timestamp)
        if batch.is_transactional:
            state.txns.on_batch(pid, first)
    write = BatchWrite(raw, first, on_done)
    topic_logs.submit(state, write)
    return write


def append_records(topic_logs: TopicLogs, topic: str, partition: int, raw: bytes, done: Callable[[int], None]) -> None:
    """Appends a batch the broker itself made (a share group's dead letters) to a partition this
    node serves, validated as a produced one; ``done(error code)`` once it is durable or refused."""
    state = topic_logs.get(topic, partition)
    if state is None or state.deleted:
        done(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    queued: list[BatchWrite] = []
    finished = [False]

    def written() -> None:
        if queued:
            done(outcome(queued[0])[0])
        else:
            finished[0] = True  # answered within submit: once it returns

    try:
        write = submit(topic_logs, state, raw, PartitionResponse(index=partition), written)
    except Rejected as exc:
        done(exc.error_code)
        return
    if isinstance(write, BatchWrite):
        queued.append(write)
        if finished[0]:
            done(outcome(write)[0])
    else:  # nothing queued (a batch of no producer is never a duplicate): done when durable
        topic_logs.when_durable(state, lambda: done(ErrorCode.NONE))


def outcome(append: BatchWrite) -> tuple[int, str | None]:
    """The error code and message for a batch the log refused (0 when it was stored)."""
    exc = append.error
    if exc is None:
        return 0, None
    if isinstance(exc, CorruptBatchError):
        code = ErrorCode.CORRUPT_MESSAGE if exc.kind in _CORRUPT_KINDS else ErrorCode.INVALID_RECORD
        return code, f"invalid record batch: {exc.reason}"
    if isinstance(exc, CompressionUnavailableError):
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, exc.reason
    if isinstance(exc, DecodeError):
        return ErrorCode.INVALID_RECORD, f"invalid record batch: {exc.reason}"
    if isinstance(exc, FencedError):
        # The node may no longer be the partition's owner (the write may be in the log or not), as
        # a Kafka leader that lost leadership answers: the producer retries with the same sequence
        # at the owner, which recognises a stored batch as a duplicate.
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"no longer certainly the partition's owner: {exc}"
    if isinstance(exc, StorageError):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the partition was deleted"
    return ErrorCode.KAFKA_STORAGE_ERROR, f"cannot write the log: {exc}"


class OpeningHold:
    """Produce requests held, per connection and in arrival order, while a partition they write is
    being opened by this node (``TopicLogs.when_opened``). A request that finds its connection's
    queue non-empty waits behind it even if its own partitions serve, so that no later request of
    a connection is appended before an earlier one."""

    def __init__(self, topic_logs: TopicLogs, catalog: TopicCatalog) -> None:
        self.topic_logs = topic_logs
        self.catalog = catalog
        self.queues: dict[int, deque[tuple[ProduceRequest, Callable[[], None]]]] = {}

    def submit(self, conn_id: int, body: ProduceRequest, run: Callable[[], None]) -> None:
        queue = self.queues.get(conn_id)
        if queue is None:
            if not self.topic_logs.opening or not self._opening(body):
                run()
                return
            queue = self.queues[conn_id] = deque()
        queue.append((body, run))
        if len(queue) == 1:
            self._next(conn_id)

    def _opening(self, body: ProduceRequest) -> list[tuple[str, int]]:
        out = []
        for td in body.topic_data:
            topic = self.catalog.by_id.get(td.topic_id) if td.topic_id and td.topic_id != bytes(16) else None
            name = topic.name if topic is not None else td.name
            out += [(name, pd.index) for pd in td.partition_data if (name, pd.index) in self.topic_logs.opening]
        return out

    def _next(self, conn_id: int) -> None:
        queue = self.queues[conn_id]
        while queue:
            body, run = queue[0]
            waiting = self._opening(body)
            if waiting:
                self.topic_logs.when_opened(waiting[0], lambda: self._next(conn_id))
                return
            queue.popleft()
            run()
        del self.queues[conn_id]


class ProduceApi:
    """Produce, over the topic logs (and the transaction coordinator, which verifies transactional batches)."""

    def __init__(self, topic_logs: TopicLogs, catalog: TopicCatalog, transactions: TransactionCoordinatorService | None,
                 clock: Callable[[], int], cluster: ClusterNode | None = None, peers: PeerClient | None = None,
                 *, verify: bool = True) -> None:
        """``verify``: the first transactional batch of a transaction on a partition is verified
        with the coordinator (``transaction.partition.verification.enable``); in a cluster
        (``cluster`` and ``peers``), a transactional id another node coordinates is verified
        there. A client of transactions version 2 has its partitions added, whatever ``verify``."""
        self.topic_logs = topic_logs
        self.catalog = catalog
        self.transactions = transactions if verify else None
        self.clock = clock
        self.checks: RemoteVerification | None = None
        self.hold = OpeningHold(topic_logs, catalog)
        self.refusals = RefusedBatches()
        if transactions is not None:
            self.checks = RemoteVerification(transactions, cluster, peers, topic_logs, self.verifier, verify=verify)

    def resolve(self, req: Request[ProduceRequest], td: ProduceRequest.TopicProduceData) -> tuple[Topic | None, int, str]:
        if req.version >= 13:
            topic = self.catalog.by_id.get(td.topic_id)
            if topic is None:
                return None, ErrorCode.UNKNOWN_TOPIC_ID, "unknown topic id"
        else:
            topic = self.catalog.get(td.name)
            if topic is None:
                return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        if topic.internal:
            return None, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic.name}"
        return topic, 0, ""


    def verifier(self, body: ProduceRequest) -> TxnVerifier | None:
        """The request's check, built once per request and only for a transactional producer."""
        service = self.transactions
        txn_id = body.transactional_id
        if service is None or not txn_id:
            return None

        clock = self.clock

        def verify(topic: str, partition: int, producer_id: int, epoch: int) -> int:
            code = service.error_for(txn_id)
            if code:
                return code
            result = service.shard_for(txn_id).add_partitions(txn_id, producer_id, epoch, [(topic, partition)],
                                                              clock(), verify_only=True)
            return result.partition_errors.get((topic, partition), result.error)

        return verify

    def produce(self, req: Request[ProduceRequest]) -> None:
        checks = self.checks
        if checks is not None and (req.body.transactional_id or req.conn.conn_id in checks.queues) and (
                self.transactions is not None or req.version >= PRODUCE_TV2_VERSION):
            # The partitions added to the transaction first (transactions version 2), or, in a
            # cluster, a transactional id coordinated by another node checked there.
            checks.submit(req.conn.conn_id, req.body, lambda verify: self.held(req, verify), req.version)
        else:
            self.held(req, self.verifier(req.body))

    def held(self, req: Request[ProduceRequest], verify: TxnVerifier | None) -> None:
        if not self.hold.queues and not self.topic_logs.opening:
            self.serve(req, verify)  # nothing opening, nothing held: the usual case, no closure
            return
        self.hold.submit(req.conn.conn_id, req.body, lambda: self.serve(req, verify))

    def serve(self, req: Request[ProduceRequest], verify: TxnVerifier | None) -> None:
        # In a cluster, the topic catalog as it is now (a stat when unchanged): records for a topic
        # that another node deleted and created again must not go into the deleted topic's log.
        self.catalog.refresh()
        body = req.body
        acks = body.acks
        appends: list[tuple[PartitionResponse, PartitionState, BatchWrite, Sequence | None]] = []
        duplicates: list[tuple[PartitionResponse, PartitionState, int, Sequence | None]] = []
        failed = False
        topics = []
        conn = req.conn.conn_id
        refusals = self.refusals

        def appended(ok: bool) -> None:
            del ok  # each append's outcome is its own partition's answer
            # A retried batch is answered once the original is durable, never before.
            waiting = {id(state): state for _resp, state, _last, _seq in duplicates}
            originals = Countdown(len(waiting), lambda _ok: answer())
            for state in waiting.values():
                self.topic_logs.when_durable(state, originals.arrive)

        # Every queued append, counted as it is queued; done once all are (``start`` below).
        appends_done = Countdown(0, appended, started=False)
        done = appends_done.arrive

        for td in body.topic_data:
            topic, topic_error, topic_message = self.resolve(req, td)
            parts = []
            for pd in td.partition_data:
                resp = PartitionResponse(index=pd.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                         log_start_offset=-1, record_errors=[], error_message=None)
                parts.append(resp)
                sequence = batch_sequence(pd.records) if req.version >= 3 and topic is not None else None
                try:
                    if acks not in (0, 1, -1):
                        raise Rejected(ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}")
                    if topic is None:
                        raise Rejected(topic_error, topic_message)
                    state = self.topic_logs.get(topic.name, pd.index)
                    if state is None:
                        raise Rejected(self.topic_logs.not_served(topic, pd.index),
                                       "This server does not host this topic-partition.")
                    if sequence is not None and (code := refusals.held(conn, topic.name, pd.index, sequence,
                                                                       state.producers)):
                        raise Rejected(code, "an earlier batch of this producer was refused on this connection: "
                                             "this one follows it when it is sent again")
                    raw = pd.records if req.version >= 3 else from_old_producer(pd.records)
                    queued = submit(self.topic_logs, state, raw, resp, done, verify, req.version >= PRODUCE_TV2_VERSION)
                    if isinstance(queued, BatchWrite):
                        appends_done.expect()
                        appends.append((resp, state, queued, sequence))
                    elif queued is not None:
                        duplicates.append((resp, state, queued, sequence))
                except Rejected as exc:
                    failed = True
                    if sequence is not None and topic is not None:
                        refusals.refused(conn, topic.name, pd.index, sequence, exc.error_code)
                    resp.error_code = exc.error_code
                    resp.error_message = str(exc)
                    resp.log_start_offset = exc.log_start_offset
                    resp.record_errors = [ProduceResponse.TopicProduceResponse.PartitionProduceResponse
                                          .BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                          for i, m in exc.record_errors]
            topics.append(ProduceResponse.TopicProduceResponse(name=td.name, topic_id=td.topic_id,
                                                              partition_responses=parts))
        response = ProduceResponse(responses=topics, throttle_time_ms=0)

        def answer() -> None:
            for resp, state, append, seq in appends:
                code, message = outcome(append)
                if code:
                    resp.error_code, resp.error_message = code, message
                    if seq is not None:
                        refusals.refused(conn, state.topic, state.partition, seq, code)
                else:
                    resp.base_offset = append.first
                    resp.log_start_offset = state.log.log_start_offset
            for resp, state, last, seq in duplicates:
                if state.deleted:
                    resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    resp.error_message = "the partition was deleted"
                elif state.high_watermark <= last:
                    resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                    resp.error_message = "the write could not be made durable"
                    if seq is not None:
                        refusals.refused(conn, state.topic, state.partition, seq, resp.error_code)
            if acks != 0:
                req.reply.set(response)

        if acks == 0:
            # Nothing is sent back; a producer that cannot read errors learns of one by the close.
            if failed:
                req.reply.set_close()
            else:
                req.reply.set_nothing()
        appends_done.start()
