"""The transaction coordinator's APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions and ListTransactions (TxnOffsetCommit goes to the group coordinator,
``broker.handlers.groups``).

InitProducerId without a transactional id gets a fresh producer id at epoch 0 on every call, as
Kafka answers idempotent producers (an epoch bump request gets a new id too); with one, the
transaction coordinator's answer. v6 (two-phase commit participants, KIP-939) is marked unstable in
Kafka 4.4, which advertises it only with ``unstable.api.versions.enable``: so does kcoord.

Every answer leaves once the records of the operation, and whatever was queued before them on
the transactional id's ``__transaction_state`` partition, are durable. While the coordinator loads
(at start, or after a failed write) requests answer COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.transaction.core.coordinator import TxnResult
from broker.coordinators.transaction.core.metadata import TxnState
from broker.coordinators.transaction.core.shard import TransactionCoordinatorShard
from broker.coordinators.transaction.service.coordinator import TransactionCoordinatorService
from broker.network.router import Request
from broker.runtime.countdown import Countdown
from broker.topics.catalog import OFFSETS_TOPIC, TopicCatalog
from broker.topics.producer_state import ProducerIdAllocator
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse

# EndTxn v5 is transactions version 2 (KIP-890 part 2: the epoch rises with every transaction).
# AddPartitionsToTxn v5 only adds an error code this coordinator never answers.
END_TXN_MAX_VERSION = 5
END_TXN_V2_VERSION = 5
ADD_PARTITIONS_MAX_VERSION = 5
INIT_PRODUCER_ID_MAX_VERSION = 5
INIT_PRODUCER_ID_UNSTABLE_VERSION = 6  # Enable2Pc and KeepPreparedTxn (KIP-939)

TopicResult = AddPartitionsToTxnResponse.TopicResult
AddPartitionsTransaction = AddPartitionsToTxnRequest.Transaction
PartitionResult = TopicResult.PartitionResult


def fenced_code(error: int, version: int, first_version_with_fenced: int) -> int:
    """PRODUCER_FENCED (KIP-588) is spelled INVALID_PRODUCER_EPOCH to older request versions."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _topic_results(errors: dict[tuple[str, int], int],
                   topics: Sequence[AddPartitionsToTxnRequest.Topic | AddPartitionsTransaction.Topic]) -> list[Any]:
    """Each partition's error, in either layout (v3 and below, or one transaction's of v4+: the
    same fields)."""
    return [TopicResult(name=t.name, results_by_partition=[
        PartitionResult(partition_index=p, partition_error_code=errors.get((t.name, p), 0)) for p in t.partitions])
        for t in topics]


class TransactionApis:
    """The transaction coordinator's APIs, over its service (broker/coordinators/transaction/service/coordinator.py)."""

    def __init__(self, service: TransactionCoordinatorService, catalog: TopicCatalog, offsets_partitions: int,
                 producer_ids: ProducerIdAllocator, clock: Callable[[], int], *,
                 unstable_api_versions: bool = False) -> None:
        """``unstable_api_versions``: ``unstable.api.versions.enable``, which advertises
        InitProducerId v6 as Kafka 4.4 does."""
        self.init_producer_id_max_version = (INIT_PRODUCER_ID_UNSTABLE_VERSION if unstable_api_versions
                                             else INIT_PRODUCER_ID_MAX_VERSION)
        self.service = service
        self.catalog = catalog
        self.offsets_partitions = offsets_partitions
        self.producer_ids = producer_ids
        self.clock = clock

    def init_producer_id(self, req: Request[InitProducerIdRequest]) -> None:
        if req.body.transactional_id is None:
            req.reply.set(InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                                 producer_id=self.producer_ids.next_id(), producer_epoch=0))
            return
        self._init_transactional_producer(req)

    def _init_transactional_producer(self, req: Request[InitProducerIdRequest]) -> None:
        body = req.body
        txn_id = body.transactional_id
        assert txn_id is not None

        def reply(error: int, pid: int = -1, epoch: int = -1) -> None:
            req.reply.set(InitProducerIdResponse(throttle_time_ms=0, error_code=fenced_code(error, req.version, 4),
                                                 producer_id=pid, producer_epoch=epoch))

        code = self.service.error_for(txn_id)
        if code:
            reply(code)
            return
        def op(shard: TransactionCoordinatorShard, now: int) -> TxnResult:
            return shard.init_producer_id(txn_id, body.transaction_timeout_ms, body.producer_id, body.producer_epoch,
                                          now, enable_two_phase=body.enable2_pc, keep_prepared=body.keep_prepared_txn)

        def done(result: TxnResult, ok: bool) -> None:
            if not ok:
                reply(ErrorCode.NOT_COORDINATOR)
            elif result.error:
                reply(result.error)
            else:
                reply(0, result.producer_id, result.producer_epoch)

        self.service.write(txn_id, op, done)

    def add_partitions(self, req: Request[AddPartitionsToTxnRequest]) -> None:
        body = req.body
        if req.version >= 4:
            self.add_partitions_batched(req)
            return

        def reply(errors: dict[tuple[str, int], int]) -> None:
            req.reply.set(AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(
                {k: fenced_code(v, req.version, 2) for k, v in errors.items()}, body.v3_and_below_topics)))

        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        code = self.service.error_for(body.v3_and_below_transactional_id)
        if code:
            reply(dict.fromkeys(wanted, code))
            return
        unknown = {tp for tp in wanted if not self._known(tp)}
        if unknown:
            # Kafka's answer: the unknown partitions fail, the others were not attempted.
            reply({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                   for tp in wanted})
            return
        txn_id = body.v3_and_below_transactional_id

        def op(shard: TransactionCoordinatorShard, now: int) -> TxnResult:
            return shard.add_partitions(txn_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
                                        wanted, now)

        self.service.write(txn_id, op, lambda result, ok: reply(
            result.partition_errors if ok else dict.fromkeys(wanted, ErrorCode.NOT_COORDINATOR)))

    def _known(self, tp: tuple[str, int], *, offsets: bool = False) -> bool:
        """A partition a transaction may hold: of a topic clients write; with ``offsets``, a group's
        offsets partition too (what a broker adds for a TxnOffsetCommit v5)."""
        if offsets and tp[0] == OFFSETS_TOPIC:
            return 0 <= tp[1] < self.offsets_partitions
        topic = self.catalog.get(tp[0])
        return topic is not None and not topic.internal and 0 <= tp[1] < topic.partitions

    def add_partitions_batched(self, req: Request[AddPartitionsToTxnRequest]) -> None:
        """v4+: several transactions, each added to or only verified (KIP-890)."""
        body = req.body
        Result = AddPartitionsToTxnResponse.Result
        results: list[AddPartitionsToTxnResponse.Result | None] = [None] * len(body.transactions)
        # Every transaction's result arrives (an error is a result too): the countdown never fails.
        all_settled = Countdown(len(body.transactions), lambda _ok: req.reply.set(AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=0, results_by_transaction=[r for r in results if r is not None])),
            started=False)

        def settle(i: int, txn: AddPartitionsTransaction, errors: dict[tuple[str, int], int]) -> None:
            results[i] = Result(transactional_id=txn.transactional_id, topic_results=_topic_results(errors, txn.topics))
            all_settled.arrive()

        for i, txn in enumerate(body.transactions):
            wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
            code = self.service.error_for(txn.transactional_id)
            if code:
                settle(i, txn, dict.fromkeys(wanted, code))
                continue
            unknown = {tp for tp in wanted if not self._known(tp, offsets=not txn.verify_only)}
            if unknown:
                settle(i, txn, {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted})
                continue
            def op(shard: TransactionCoordinatorShard, now: int, txn: AddPartitionsTransaction = txn,
                   wanted: list[tuple[str, int]] = wanted) -> TxnResult:
                return shard.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, now,
                                            verify_only=txn.verify_only)

            def done(result: TxnResult, ok: bool, i: int = i, txn: AddPartitionsTransaction = txn,
                     wanted: list[tuple[str, int]] = wanted) -> None:
                settle(i, txn, result.partition_errors if ok else dict.fromkeys(wanted, ErrorCode.NOT_COORDINATOR))

            self.service.write(txn.transactional_id, op, done)
        all_settled.start()

    def add_offsets(self, req: Request[AddOffsetsToTxnRequest]) -> None:
        body = req.body

        def reply(error: int) -> None:
            req.reply.set(AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_code(error, req.version, 2)))

        code = self.service.error_for(body.transactional_id)
        if code:
            reply(code)
            return
        tp = (OFFSETS_TOPIC, partition_for(body.group_id, self.offsets_partitions))
        def op(shard: TransactionCoordinatorShard, now: int) -> TxnResult:
            return shard.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch, [tp], now)

        self.service.write(body.transactional_id, op,
                           lambda result, ok: reply(result.error if ok else ErrorCode.NOT_COORDINATOR))

    def end_txn(self, req: Request[EndTxnRequest]) -> None:
        """v5 (transactions version 2): the epoch bumped, and the answer names the producer id and
        epoch the producer goes on with (-1 with an error)."""
        body = req.body
        tv2 = req.version >= END_TXN_V2_VERSION

        def reply(error: int, pid: int = -1, epoch: int = -1) -> None:
            req.reply.set(EndTxnResponse(throttle_time_ms=0, error_code=fenced_code(error, req.version, 2),
                                         producer_id=-1 if error else pid, producer_epoch=-1 if error else epoch))

        code = self.service.error_for(body.transactional_id)
        if code:
            reply(code)
            return
        def op(shard: TransactionCoordinatorShard, now: int) -> TxnResult:
            return shard.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.committed, now,
                                 tv2=tv2)

        # Kafka answers once PrepareCommit/PrepareAbort is durable and lets the producer's next
        # AddPartitionsToTxn meet CONCURRENT_TRANSACTIONS until the markers are written, which
        # costs the producer a retry backoff (100 ms in librdkafka) per transaction. Here EndTxn
        # answers once the transaction has completed: the markers take a few milliseconds and the
        # producer can begin the next transaction at once.
        self.service.write(body.transactional_id, op,
                           lambda result, ok: reply(result.error, result.producer_id, result.producer_epoch)
                           if ok else reply(ErrorCode.NOT_COORDINATOR), until_complete=True)

    def describe_transactions(self, req: Request[DescribeTransactionsRequest]) -> None:
        State = DescribeTransactionsResponse.TransactionState
        out = []
        for txn_id in req.body.transactional_ids:
            serving = self.service.error_for(txn_id) if txn_id else ErrorCode.NONE
            meta = self.service.transaction(txn_id) if not serving else None
            if serving or not txn_id or meta is None or meta.state is TxnState.DEAD:
                code = (serving if serving else
                        ErrorCode.INVALID_REQUEST if not txn_id else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
                out.append(State(error_code=code, transactional_id=txn_id, transaction_state="",
                                 transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                 producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(meta.partitions):
                by_topic.setdefault(topic, []).append(partition)
            out.append(State(error_code=0, transactional_id=txn_id, transaction_state=meta.state.kafka_name,
                             transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
                             producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                             topics=[State.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
        self.service.after_durable(lambda: req.reply.set(DescribeTransactionsResponse(throttle_time_ms=0,
                                                                                  transaction_states=out)))

    def list_transactions(self, req: Request[ListTransactionsRequest]) -> None:
        body = req.body
        if not self.service.loaded:
            req.reply.set(ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                                   unknown_state_filters=[], transaction_states=[]))
            return
        known = {s for s in body.state_filters if TxnState.from_name(s) is not None}
        unknown = [s for s in body.state_filters if s not in known]
        duration = body.duration_filter if req.version >= 1 else -1
        listed = self.service.listed(known, set(body.producer_id_filters), duration, self.clock())
        pattern = body.transactional_id_pattern if req.version >= 2 else None
        if pattern:
            try:
                matcher = re.compile(pattern)
            except re.error:
                req.reply.set(ListTransactionsResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                                       unknown_state_filters=[], transaction_states=[]))
                return
            listed = [m for m in listed if matcher.fullmatch(m.transactional_id)]
        if body.state_filters and not known:
            listed = []
        states = [ListTransactionsResponse.TransactionState(transactional_id=m.transactional_id,
                                                            producer_id=m.producer_id,
                                                            transaction_state=m.state.kafka_name) for m in listed]
        self.service.after_durable(lambda: req.reply.set(ListTransactionsResponse(
            throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=states)))
