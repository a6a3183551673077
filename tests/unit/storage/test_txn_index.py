"""The ``.txnindex`` file: Kafka's 34-byte entries, one file per segment holding ABORT markers,
appended as transactions abort and rewritten from the log when it disagrees."""

from __future__ import annotations

import os
from pathlib import Path

from protocol.record_batch import build_end_txn_marker, build_simple_batch
from storage import txn_index
from storage.config import LogConfig
from storage.layout import TXN_INDEX
from storage.partition_log import PartitionLog
from storage.txn_index import AbortedTxn

CFG = LogConfig(segment_bytes=400, index_interval_bytes=100)


def kafka_entry(producer_id: int, first: int, last: int, lso: int) -> bytes:
    """Kafka's AbortedTxn layout, spelled out field by field: version int16 0, then four int64."""
    return ((0).to_bytes(2, "big") + producer_id.to_bytes(8, "big", signed=True) + first.to_bytes(8, "big")
            + last.to_bytes(8, "big") + lso.to_bytes(8, "big"))


def test_entries_are_kafkas_34_bytes() -> None:
    entries = [AbortedTxn(1000, 5, 9, 10), AbortedTxn(2**40, 11, 20, 7)]
    data = txn_index.encode(entries)
    assert data == kafka_entry(1000, 5, 9, 10) + kafka_entry(2**40, 11, 20, 7)
    assert txn_index.decode(data) == entries


def test_a_torn_or_foreign_file_reads_as_damaged(tmp_path: Path) -> None:
    assert txn_index.read(tmp_path / "missing.txnindex") == []
    assert txn_index.decode(kafka_entry(1, 2, 3, 4)[:-1]) is None
    assert txn_index.decode(b"\x00\x01" + kafka_entry(1, 2, 3, 4)[2:]) is None  # version 1 is not Kafka's


def test_rewrite_replaces_the_file_and_removes_it_when_empty(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    txn_index.rewrite(path, [AbortedTxn(1, 2, 3, 4)])
    assert path.read_bytes() == kafka_entry(1, 2, 3, 4)
    txn_index.append(path, AbortedTxn(5, 6, 7, 8))
    assert txn_index.read(path) == [AbortedTxn(1, 2, 3, 4), AbortedTxn(5, 6, 7, 8)]
    txn_index.rewrite(path, [])
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def aborted_transaction(log: PartitionLog, producer_id: int, records: int) -> AbortedTxn:
    first = log.end_offset
    for i in range(records):
        log.append_batch(build_simple_batch([(b"k", b"v%d" % i, 1)], producer_id=producer_id, producer_epoch=0,
                                            base_sequence=i, transactional=True))
    last, _ = log.append_batch(build_end_txn_marker(0, producer_id=producer_id, producer_epoch=0, commit=False,
                                                    coordinator_epoch=0, timestamp=1))
    return AbortedTxn(producer_id, first, last, last + 1)


def index_files(path: Path) -> dict[str, list[AbortedTxn] | None]:
    return {n: txn_index.read(path / n) for n in sorted(os.listdir(path)) if n.endswith(TXN_INDEX)}


def test_an_entry_goes_to_the_segment_holding_the_marker(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG)
    first = aborted_transaction(log, 7, 2)
    log.add_aborted_txn(first)
    log.roll()
    second = aborted_transaction(log, 8, 1)
    log.add_aborted_txn(second)
    bases = [s.base_offset for s in log.segments()]
    assert index_files(tmp_path) == {f"{bases[0]:020d}.txnindex": [first], f"{bases[1]:020d}.txnindex": [second]}
    log.add_aborted_txn(AbortedTxn(9, 0, log.end_offset + 5, 0))  # no marker there: nothing to note
    assert len(index_files(tmp_path)) == 2
    log.close()


def test_reconcile_writes_what_the_log_says_and_only_that(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG)
    first = aborted_transaction(log, 7, 2)
    log.roll()
    second = aborted_transaction(log, 8, 1)
    bases = [s.base_offset for s in log.segments()]
    names = [f"{b:020d}.txnindex" for b in bases]
    # Missing files (a crash before the append) are written.
    assert log.reconcile_txn_index([first, second]) == 2
    assert index_files(tmp_path) == {names[0]: [first], names[1]: [second]}
    assert log.reconcile_txn_index([first, second]) == 0  # nothing to do the second time
    # A torn file and an entry the log no longer holds (a truncated tail) are corrected.
    with open(tmp_path / names[0], "ab") as f:
        f.write(b"\x00\x00\x01")
    assert log.reconcile_txn_index([first]) == 2
    assert index_files(tmp_path) == {names[0]: [first]}
    log.close()


def test_opening_removes_an_unfinished_rewrite_and_an_index_without_its_segment(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG)
    txn = aborted_transaction(log, 7, 1)
    log.add_aborted_txn(txn)
    log.close()
    (tmp_path / "00000000000000000000.txnindex.tmp").write_bytes(kafka_entry(1, 2, 3, 4)[:10])
    (tmp_path / "00000000000000000999.txnindex").write_bytes(kafka_entry(1, 999, 1000, 1001))
    reopened, report = PartitionLog.open(tmp_path, CFG)
    assert sorted(name for name, _ in report.leftovers) == [
        "00000000000000000000.txnindex.tmp", "00000000000000000999.txnindex"]
    assert index_files(tmp_path) == {"00000000000000000000.txnindex": [txn]}
    reopened.close()
