"""Under a steady commit load to a few partitions, the log cleaner keeps the data dir bounded and
a restart still sees the latest commits."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from broker.coordinators.group.core.base.partitioning import partition_for
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from tests.integration.helpers.clients import create_topic

pytestmark = pytest.mark.timeout(180)


def _dir_bytes(path: Path) -> int:
    """The segments' bytes; a segment the cleaner deletes between the listing and its size counts 0."""
    total = 0
    for f in path.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):
            total += f.stat().st_size
    return total


def test_steady_commits_keep_the_offsets_log_bounded(broker_factory) -> None:
    b = broker_factory({"offsets.topic.segment.bytes": "65536", "log.cleaner.backoff.ms": "200",
                        "log.cleaner.min.cleanable.ratio": "0.1"})
    create_topic(b.bootstrap, "steady", 4)
    pdir = b.data_dir / f"__consumer_offsets-{partition_for('steady-group')}"
    written = 0
    sizes = []
    deadline = time.monotonic() + 12
    offset = 0
    with WireClient("127.0.0.1", b.port) as c:
        while time.monotonic() < deadline:
            offset += 1
            resp = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
                group_id="steady-group", generation_id_or_member_epoch=-1, member_id="", topics=[
                    OffsetCommitRequest.Topic(name="steady", partitions=[
                        OffsetCommitRequest.Topic.Partition(partition_index=p, committed_offset=offset,
                                                            committed_metadata="m" * 100) for p in range(4)])]))
            assert all(p.error_code == 0 for p in resp.topics[0].partitions)
            written += 4 * 180
            if offset % 200 == 0:
                sizes.append(_dir_bytes(pdir))
    assert written > 2_000_000, "the load was too light to prove anything"
    # Without compaction the log would hold everything written; with it, a few segments at most.
    assert max(sizes[len(sizes) // 2 :]) < 600_000, sizes
    assert "log.compacted" in b.log()
    assert b.stop() == 0
    b.start()
    b.wait_loaded()
    with WireClient("127.0.0.1", b.port) as c:
        got = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id="steady-group", topics=None))
    assert {p.partition_index: p.committed_offset for t in got.topics for p in t.partitions} == \
        {p: offset for p in range(4)}
