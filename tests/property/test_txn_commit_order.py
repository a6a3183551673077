"""Transactional and plain offset commits of the same partitions, interleaved in any order with
COMMIT/ABORT markers and offset deletions: the committed offset of a partition is always the one
of the *newest record* among its plain commits and the records of committed transactions written
after its last deletion (Kafka's rule: a marker does not let an older transactional record replace
a newer commit). It holds live, after a restart, and after any cleaning of the log.

The model is independent of the coordinator's bookkeeping: it looks at the whole history and, for
each transactional record, at the first marker of its producer written after it.
"""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import OffsetCommitRecord, encode_record
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.replay_plan import replay_log
from protocol.errors import ErrorCode
from protocol.messages.offsets_log import OffsetCommitValue
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from protocol.record_batch import build_end_txn_marker, build_simple_batch
from storage.cleaner import clean
from storage.config import LogConfig
from storage.partition_log import PartitionLog
from tests.unit.coordinators.group.core.harness import Harness

GROUP = "g"
PARTITIONS = (0, 1)
PRODUCERS = (5, 6)
CFG = LogConfig(segment_bytes=700, index_interval_bytes=100, cleanup_policy="compact", delete_retention_ms=10**9)

step = st.one_of(
    st.tuples(st.just("plain"), st.sampled_from(PARTITIONS), st.integers(0, 99)),
    st.tuples(st.just("txn"), st.sampled_from(PRODUCERS), st.sampled_from(PARTITIONS), st.integers(100, 199)),
    st.tuples(st.just("marker"), st.sampled_from(PRODUCERS), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(PARTITIONS)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("clean")),
)


def expected(history: list[tuple[Any, ...]]) -> dict[int, int]:
    """partition -> committed offset, from the history's records alone."""
    out: dict[int, int] = {}
    for partition in PARTITIONS:
        newest: tuple[int, int] | None = None  # (position, offset)
        for pos, entry in enumerate(history):
            if entry[0] == "delete" and entry[1] == partition:
                newest = None
            elif entry[0] == "plain" and entry[1] == partition:
                newest = (pos, entry[2])
            elif entry[0] == "marker" and entry[2]:  # a COMMIT: its producer's records since its last marker
                pid = entry[1]
                start = max((i for i in range(pos) if history[i][0] == "marker" and history[i][1] == pid), default=-1)
                deleted = max((i for i in range(pos) if history[i] == ("delete", partition)), default=-1)
                for i in range(max(start, deleted) + 1, pos):
                    e = history[i]
                    if e[0] == "txn" and e[1] == pid and e[2] == partition and (newest is None or i > newest[0]):
                        newest = (i, e[3])
        if newest is not None:
            out[partition] = newest[1]
    return out


def committed(shard: GroupCoordinatorShard) -> dict[int, int]:
    _, rows = shard.offset_fetch_group(GROUP, [("t", list(PARTITIONS))], False)
    return {p: o for _, p, o, *_ in rows if o >= 0}


def live_step(h: Harness, entry: tuple[Any, ...]) -> None:
    if entry[0] == "plain":
        assert h.commit(GROUP, {("t", entry[1]): entry[2]}) == {("t", entry[1]): 0}
    elif entry[0] == "txn":
        _, pid, partition, offset = entry
        req = TxnOffsetCommitRequest(
            transactional_id=f"tx-{pid}", group_id=GROUP, producer_id=pid, producer_epoch=0, generation_id_or_member_epoch=-1,
            member_id="", group_instance_id=None, topics=[TxnOffsetCommitRequest.Topic(name="t", partitions=[
                TxnOffsetCommitRequest.Topic.Partition(partition_index=partition, committed_offset=offset,
                                                       committed_metadata=None)])])
        ctx = h.ctx(3)
        h.op(h.shard.txn_offset_commit(req, ctx, h.now))
        assert h.response(ctx.token).topics[0].partitions[0].error_code == 0
    elif entry[0] == "marker":
        h.op(h.shard.write_txn_marker(entry[1], 0, entry[2], 0))
    elif entry[0] == "delete":
        assert h.delete_offsets(GROUP, {"t": [entry[1]]}).error_code == 0


def log_step(log: PartitionLog, entry: tuple[Any, ...], now: int) -> None:
    if entry[0] in ("plain", "txn", "delete"):
        partition = entry[1] if entry[0] != "txn" else entry[2]
        value = None if entry[0] == "delete" else OffsetCommitValue(
            offset=entry[-1], leader_epoch=-1, metadata="", commit_timestamp=now, expire_timestamp=-1)
        kv = encode_record(OffsetCommitRecord(GROUP, "t", partition, value))
        if entry[0] == "txn":
            log.append_batch(build_simple_batch([(*kv, now)], producer_id=entry[1], producer_epoch=0,
                                                transactional=True))
        else:
            log.append_batch(build_simple_batch([(*kv, now)]))
    elif entry[0] == "marker":
        log.append_batch(build_end_txn_marker(0, producer_id=entry[1], producer_epoch=0, commit=entry[2],
                                              coordinator_epoch=0, timestamp=now))
    elif entry[0] == "roll":
        log.roll()
    else:
        clean(log, now, force=True)


def replayed(log: PartitionLog) -> GroupCoordinatorShard:
    shard = GroupCoordinatorShard(0, CoordinatorConfig(), Harness().topics, lambda p: p)
    replay_log(lambda: log.batches(), shard.replay, shard.replay_txn_offset, shard.replay_marker)
    return shard


@settings(max_examples=200, deadline=None)
@given(st.lists(step, min_size=3, max_size=40))
def test_the_newest_committed_record_wins_live_after_restart_and_after_cleaning(steps: list[tuple[Any, ...]]) -> None:
    h = Harness(topics={"t": len(PARTITIONS)})
    history: list[tuple[Any, ...]] = []
    now = 1000
    with tempfile.TemporaryDirectory() as d:
        log, _ = PartitionLog.open(d, CFG, clock=lambda: now)
        for entry in steps:
            if entry[0] == "delete" and GROUP not in h.shard.state.groups:
                continue  # OffsetDelete of a group that does not exist yet writes nothing
            log_step(log, entry, now)
            if entry[0] in ("roll", "clean"):
                continue
            live_step(h, entry)
            history.append(entry)
            assert committed(h.shard) == expected(history), history
            now += 1
        h.restart()
        assert committed(h.shard) == expected(history)
        assert committed(replayed(log)) == expected(history)
        log.close()


def test_a_plain_commit_made_while_a_transaction_is_open_is_not_replaced_at_its_marker() -> None:
    history = [("txn", 5, 0, 150), ("plain", 0, 7), ("marker", 5, True)]
    h = Harness(topics={"t": 2})
    for entry in history[:2]:
        live_step(h, entry)
    # Until the marker the partition stays unstable for require_stable, as in Kafka.
    assert h.fetch(GROUP, [("t", [0])])[("t", 0)][3] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    live_step(h, history[2])
    assert committed(h.shard) == {0: 7}
    h.restart()
    assert committed(h.shard) == {0: 7}


def test_the_newer_of_two_transactions_wins_whichever_commits_first() -> None:
    for first, second in ((5, 6), (6, 5)):
        h = Harness(topics={"t": 2})
        for entry in (("txn", 5, 0, 150), ("txn", 6, 0, 160), ("marker", first, True), ("marker", second, True)):
            live_step(h, entry)
        assert committed(h.shard) == {0: 160}
