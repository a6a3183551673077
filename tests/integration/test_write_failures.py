"""A disk that fills up: commits that cannot be written fail with a coordinator error clients retry,
nothing acknowledged is lost, and the broker recovers once there is room again."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from tests.integration.helpers.cluster import wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the test command runs as root in CI)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _commit(c: WireClient, partition: int, offset: int, metadata: str) -> int:
    resp = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
        group_id="full-disk", generation_id_or_member_epoch=-1, member_id="", topics=[OffsetCommitRequest.Topic(
            name="t", partitions=[OffsetCommitRequest.Topic.Partition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata)])]))
    return int(resp.topics[0].partitions[0].error_code)


def test_full_disk_fails_commits_cleanly_and_recovers(broker_factory, small_disk: Path) -> None:
    b = broker_factory({"offsets.topic.num.partitions": "1", "log.cleaner.enable": "false"},
                       data_dir=small_disk / "data")
    from tests.integration.helpers.clients import create_topic

    create_topic(b.bootstrap, "t", 1)
    filler = small_disk / "filler"
    acked: list[int] = []
    codes: list[int] = []
    with WireClient("127.0.0.1", b.port) as c:
        assert _commit(c, 0, 1, "") == 0
        acked.append(1)
        # Leave only a little room, then commit with large metadata until the disk is full.
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        filler.write_bytes(b"\0" * max(free - 64 * 1024, 0))
        for offset in range(2, 200):
            code = _commit(c, 0, offset, "m" * 4000)
            codes.append(code)
            if code == 0:
                acked.append(offset)
            else:
                break
    assert codes[-1] in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), codes[-1]
    assert "log.write_failed" in b.log()

    filler.unlink()
    with WireClient("127.0.0.1", b.port) as c:
        # The shard reloads from the log; commits work again, and the last acknowledged one is there.
        def fetched() -> Any:
            return c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id="full-disk", topics=None))

        wait_for(lambda: fetched().error_code == 0, 60, "the shard reloaded (OffsetFetch answered)",
                 seen=lambda: fetched().error_code)
        resp = fetched()
        stored = {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
        assert stored[0] >= acked[-1]
        assert _commit(c, 0, 10_000, "") == 0
    assert b.stop() == 0
    b.start()
    b.wait_loaded()
    with WireClient("127.0.0.1", b.port) as c:
        resp = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id="full-disk", topics=None))
    assert {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions} == {0: 10_000}
