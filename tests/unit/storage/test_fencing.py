"""Fencing where files change: a log whose owner's claim has ended (its fence revoked, or its lease
possibly expired) changes no file of the partition any more, whatever path tries; a segment is
never created over an existing one; a claim opens the log afresh from its files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from broker.cluster.node import ClusterNode, boottime
from broker.log_runtime.runtime import Partition
from protocol.record_batch import decode_records
from storage.cleaner import clean
from storage.config import LogConfig
from storage.errors import FencedError
from storage.fencing import REVOKED, Fence
from storage.log_manager import LogManager
from storage.partition_log import PartitionLog
from storage.retention import apply_retention
from storage.segment import Segment
from storage.txn_index import AbortedTxn

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=200, segment_index_bytes=4096)
COMPACT = LogConfig(segment_bytes=2000, index_interval_bytes=200, segment_index_bytes=4096,
                    cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)


def files(directory: Path) -> dict[str, str]:
    """Every file of the directory with a digest of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def fill(log: PartitionLog, batches: int, keys: int = 1000) -> None:
    for i in range(batches):
        log.append([(b"k%d" % (i % keys), b"value-%d" % i + b"x" * 100, 1000 + i)])


def open_fenced(directory: Path, config: LogConfig = SMALL) -> tuple[PartitionLog, Fence]:
    log, _report = PartitionLog.open(directory, config)
    fence = Fence("t-0", 7)
    log.fence = fence
    return log, fence


def test_a_segment_is_never_created_over_an_existing_one(tmp_path: Path) -> None:
    seg = Segment.create(tmp_path, 100, SMALL, now_ms=0)
    log, _ = PartitionLog.open(tmp_path / "other", SMALL)
    fill(log, 3)
    raw = log.read(0, 1 << 20)
    seg.append(raw)
    seg.close()
    before = files(tmp_path)
    with pytest.raises(FileExistsError):
        Segment.create(tmp_path, 100, SMALL, now_ms=0)
    assert files(tmp_path) == before
    log.close()


@pytest.mark.parametrize("end", ["revoked", "lease lapsed"])
def test_a_fenced_log_changes_no_file_whatever_path_tries(tmp_path: Path, end: str) -> None:
    lease = [True]
    log, _report = PartitionLog.open(tmp_path, SMALL)
    fence = Fence("t-0", 7, lambda: lease[0])
    log.fence = fence
    fill(log, 40)  # several segments
    log.flush()
    assert log.segment_count > 2
    if end == "revoked":
        fence.revoke()
    else:
        lease[0] = False
    before = files(tmp_path)
    end_offset, segments = log.end_offset, log.segment_count
    attempts = [
        lambda: log.append([(b"k", b"late", 1)]),
        lambda: log.append_batch(log.read(0, 1)),
        log.roll,
        log.flush,
        lambda: log.begin_epoch(9),
        lambda: log.delete_oldest_segments(1),
        lambda: log.add_aborted_txn(AbortedTxn(1, 0, 5, 0)),
        lambda: apply_retention(log, now_ms=10**13),
        lambda: log.delete_records_before(log.end_offset),
    ]
    for attempt in attempts:
        with pytest.raises(FencedError):
            attempt()
    assert files(tmp_path) == before
    assert (log.end_offset, log.segment_count) == (end_offset, segments)
    # Closing lets go of the files: the active segment's preallocated indexes are not trimmed.
    log.close()
    assert files(tmp_path) == before


def test_compaction_of_a_fenced_log_writes_and_swaps_nothing(tmp_path: Path) -> None:
    log, fence = open_fenced(tmp_path, COMPACT)
    fill(log, 60, keys=3)
    log.flush()
    fence.revoke()
    before = files(tmp_path)
    with pytest.raises(FencedError):
        clean(log, force=True)
    assert files(tmp_path) == before
    log.abandon()


@pytest.mark.parametrize("cut", [3, 4, 6])
def test_a_swap_cut_short_by_the_fence_is_finished_or_undone_by_the_next_owner(tmp_path: Path, cut: int) -> None:
    log, fence = open_fenced(tmp_path, COMPACT)
    fill(log, 60, keys=3)
    log.flush()
    expected = {b"k0", b"k1", b"k2"}
    original = log.replace_segments

    def revoke_midway(old: list[Segment], new: Segment, steps: list) -> bool:  # type: ignore[type-arg]
        def revoking_step() -> None:
            fence.revoke()

        return original(old, new, [*steps[:cut], revoking_step, *steps[cut:]])

    log.replace_segments = revoke_midway  # type: ignore[method-assign]
    with pytest.raises(FencedError):
        clean(log, force=True)
    log.abandon()
    reopened, _ = PartitionLog.open(tmp_path, COMPACT)
    assert {r.key for b in reopened.batches() for r in decode_records(b)} == expected
    assert reopened.end_offset == 60
    reopened.close()


def test_a_claim_opens_the_log_afresh_from_its_files(tmp_path: Path) -> None:
    """Node A owned the partition and remembered its end; node B owned it since and wrote more;
    A's new claim must see B's writes, not what A remembered."""
    a = LogManager(tmp_path, SMALL, shared=True)
    b = LogManager(tmp_path, SMALL, shared=True)
    first = Fence("t-0", 1)
    log_a = a.get_or_create("t", 0, fence=first)
    fill(log_a, 5)
    log_a.flush()
    first.revoke()  # A loses it (and, say, forgets to close its log)
    log_b = b.get_or_create("t", 0, fence=Fence("t-0", 2))
    log_b.begin_epoch(2)
    fill(log_b, 50)
    log_b.flush()
    again = a.get_or_create("t", 0, fence=Fence("t-0", 3))
    assert again is not log_a
    assert again.end_offset == 55
    again.begin_epoch(3)
    fill(again, 1)
    assert again.epochs.entries[-2:] == [(2, 5), (3, 55)]
    again.close()
    log_b.close()


def test_a_claim_already_over_opens_nothing(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, SMALL, shared=True)
    with pytest.raises(FencedError):
        manager.get_or_create("t", 0, fence=REVOKED)
    assert not (tmp_path / "t-0").exists()


class _Listener:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self.seen: list[bool] = []

    def on_gain(self, partition: tuple[str, int], epoch: int) -> None:
        del partition, epoch

    async def on_release(self, partition: tuple[str, int]) -> None:
        del partition

    def on_lose(self, partition: tuple[str, int]) -> None:
        # What the broker does first on a loss: by then the fence must already have fallen.
        self.seen.append(self.node.fence_for(partition).ok)


def test_losing_a_partition_revokes_its_fence_before_anything_else(tmp_path: Path) -> None:
    from broker.cluster.etcd import EtcdClient

    node = ClusterNode(EtcdClient("127.0.0.1:1"), "/k", 1, "127.0.0.1", 9092, 3000, lambda: [])
    assert node.clock is boottime
    node.renewed_at = node.clock()
    listener = _Listener(node)
    node.listener = listener
    fences = {}
    for p in range(3):
        key = ("t", p)
        node.mine[key] = 10 + p
        fences[key] = node.fences[key] = Fence(f"t-{p}", 10 + p, node.may_write)
    assert all(f.ok for f in fences.values())
    node._lose_everything("lease expired")
    assert listener.seen == [False, False, False]
    assert not any(f.ok for f in fences.values())
    # A partition never claimed here, or claimed and lost, has no valid fence.
    assert not node.fence_for(("t", 0)).ok


def test_the_lease_clock_counts_suspension() -> None:
    import time

    assert abs(boottime() - time.clock_gettime(time.CLOCK_BOOTTIME)) < 1.0


def test_a_runtime_partition_tells_when_its_claim_has_ended(tmp_path: Path) -> None:
    log, fence = open_fenced(tmp_path)
    part = Partition("t", 0, log, None)
    assert not part.fenced
    part.fence = fence
    assert not part.fenced
    fence.revoke()
    assert part.fenced
    log.close()


def test_a_fenced_node_does_not_name_itself_leader_of_what_it_no_longer_serves() -> None:
    from broker.cluster.etcd import EtcdClient
    from broker.cluster.node import Owner

    node = ClusterNode(EtcdClient("127.0.0.1:1"), "/k", 1, "127.0.0.1", 9092, 3000, lambda: [])
    node.renewed_at = node.clock()
    node.nodes = {1: ("127.0.0.1", 9092), 2: ("127.0.0.1", 9093)}
    node.owners = {("t", 0): Owner(1, 40), ("t", 1): Owner(2, 41)}
    node.mine = {("t", 0): 40}
    node.fences[("t", 0)] = Fence("t-0", 40, node.may_write)
    assert node.owner_of(("t", 0)) == (1, 40)
    assert node.owner_of(("t", 1)) == (2, 41)
    node._lose_everything("lease not renewed in time")  # etcd still says node 1: it could not be read
    assert node.owner_of(("t", 0)) is None
    assert node.owner_of(("t", 1)) == (2, 41)


def test_a_late_roll_by_a_replaced_owner_cannot_empty_the_new_owners_segment(tmp_path: Path) -> None:
    """The loss seen in a cluster: the old owner, stopped between its ownership check and its
    write, resumes after another node took over at the old end offset; its write rolls a segment at
    that same base. Created with O_TRUNC it emptied the new owner's segment; it must fail instead."""
    old, _ = PartitionLog.open(tmp_path, SMALL)
    fill(old, 12)
    old.flush()
    assert old.active_segment.size > 0  # the next batch, as large as a segment, rolls
    end = old.end_offset
    new, _ = PartitionLog.open(tmp_path, SMALL)
    new.fence = Fence("t-0", 2)
    new.begin_epoch(2)
    fill(new, 5)
    new.flush()
    written = (tmp_path / f"{end:020d}.log").read_bytes()
    assert written
    # The old owner's check passed before it stopped (as if no fence were held at all).
    with pytest.raises(FileExistsError):
        old.append([(b"late", b"x" * 1990, 1)])
    assert (tmp_path / f"{end:020d}.log").read_bytes() == written
    old.abandon()
    new.close()
    reopened, _ = PartitionLog.open(tmp_path, SMALL)
    assert reopened.end_offset == end + 5
    reopened.close()


def test_a_torn_late_append_in_an_old_segment_costs_the_segments_after_it_nothing(tmp_path: Path) -> None:
    """A replaced owner's late append into its old active segment, cut short by a crash: what the
    next owner wrote after it (in the following segments) is the log and stays."""
    old, _ = PartitionLog.open(tmp_path, SMALL)
    fill(old, 3)
    old.flush()
    end = old.end_offset
    new, _ = PartitionLog.open(tmp_path, SMALL)
    new.begin_epoch(2)
    fill(new, 30)
    new.flush()
    expected = [(b.base_offset, bytes(b.raw)) for b in new.batches()]
    new.close()
    # Half a batch at the end of the old segment (its header says offset ``end``).
    late = old.read(0, 1)
    torn = bytearray(late[: len(late) // 2])
    torn[0:8] = end.to_bytes(8, "big")
    with open(tmp_path / f"{0:020d}.log", "ab") as f:
        f.write(torn)
    old.abandon()
    reopened, report = PartitionLog.open(tmp_path, SMALL)
    assert [(b.base_offset, bytes(b.raw)) for b in reopened.batches()] == expected
    assert [t.kind for t in report.truncations] == ["stale-owner"]
    reopened.close()


def test_a_partition_the_broker_stops_serving_on_its_own_is_handed_back() -> None:
    """A write refused while the lease could have expired, the lease then renewed after all: the
    broker dropped the partition, so the claim goes too (its key is then handed back and the
    partition claimed afresh), instead of staying owned here and served by nobody."""
    from broker.cluster.etcd import EtcdClient

    node = ClusterNode(EtcdClient("127.0.0.1:1"), "/k", 1, "127.0.0.1", 9092, 3000, lambda: [])
    node.renewed_at = node.clock()
    listener = _Listener(node)
    node.listener = listener
    node.mine[("t", 0)] = 40
    fence = node.fences[("t", 0)] = Fence("t-0", 40, node.may_write)
    node.relinquish(("t", 0), "write refused")
    assert ("t", 0) not in node.mine
    assert not fence.ok and listener.seen == [False]
    node.relinquish(("t", 0), "again")  # nothing left to give up
    assert listener.seen == [False]
