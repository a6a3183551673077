"""A group-commit pass over several logs made durable by one syncfs, on real files: what counts as
durable, what fails when the kernel reports an error, and which passes keep their fdatasyncs."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.log_runtime.runtime import LogRuntime, Partition
from storage import filesystem_sync
from storage.config import LogConfig
from storage.partition_log import PartitionLog

pytestmark = pytest.mark.skipif(not filesystem_sync.available(), reason="no syncfs that reports errors here")


class Owner:
    def __init__(self) -> None:
        self.failures: list[Exception] = []

    def on_write_failed(self, exc: Exception) -> None:
        self.failures.append(exc)


class SyncfsCalls:
    """syncfs as it is, counted; or failing with EIO."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.real = filesystem_sync.syncfs

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.fail:
            raise OSError(errno.EIO, "Input/output error")
        self.real(fd)


@asynccontextmanager
async def running(tmp_path: Path) -> AsyncIterator[LogRuntime]:
    logs = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None,
                      fs_sync=True)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(logs.run)
            yield logs
            nursery.cancel_scope.cancel()
    finally:
        logs.close()


def open_parts(logs: LogRuntime, count: int) -> list[tuple[Partition, Owner]]:
    out = []
    for i in range(count):
        owner = Owner()
        out.append((logs.adopt(logs.open("__consumer_offsets", i, owner=owner)), owner))
    return out


async def one_pass(logs: LogRuntime, parts: list[Partition], records: int = 3) -> list[bool]:
    """Queues ``records`` records on each partition in one pass; what each one's wait heard."""
    heard: list[bool] = []
    done = trio.Event()
    for part in parts:
        logs.append_records(part, [(b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(records)])

        def told(ok: bool) -> None:
            heard.append(ok)
            if len(heard) == len(parts):
                done.set()

        part.when_durable(told)
    logs.kick()
    with trio.fail_after(30):
        await done.wait()
    return heard


@pytest.mark.trio
async def test_one_syncfs_makes_every_log_of_a_pass_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = SyncfsCalls()
    monkeypatch.setattr(filesystem_sync, "syncfs", counted)
    async with running(tmp_path) as logs:
        parts = [p for p, _ in open_parts(logs, 3)]
        assert all(p.same_fs for p in parts)
        assert await one_pass(logs, parts) == [True, True, True]
        assert counted.calls == 1
        for part in parts:
            assert part.log.recovery_point == part.log.end_offset == part.high_watermark == 3
        assert await one_pass(logs, parts) == [True, True, True]
        assert counted.calls == 2
        assert [p.log.recovery_point for p in parts] == [6, 6, 6]


@pytest.mark.trio
async def test_a_pass_of_one_log_fdatasyncs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = SyncfsCalls()
    monkeypatch.setattr(filesystem_sync, "syncfs", counted)
    async with running(tmp_path) as logs:
        [(part, _)] = open_parts(logs, 1)
        assert await one_pass(logs, [part]) == [True]
        assert counted.calls == 0
        assert part.log.recovery_point == part.high_watermark == 3


@pytest.mark.trio
async def test_a_log_on_another_filesystem_is_synced_on_its_own(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    counted = SyncfsCalls()
    monkeypatch.setattr(filesystem_sync, "syncfs", counted)
    async with running(tmp_path) as logs:
        parts = [p for p, _ in open_parts(logs, 3)]
        parts[2].same_fs = False  # as if its directory were mounted from another filesystem
        assert await one_pass(logs, parts) == [True, True, True]
        assert counted.calls == 1
        assert [p.log.recovery_point for p in parts] == [3, 3, 3]


@pytest.mark.trio
async def test_a_failed_syncfs_fails_every_log_it_covered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel does not say which file it could not write: no log of the pass is durable, each
    stops taking writes and its owner is told to rebuild from what the log holds."""
    failing = SyncfsCalls(fail=True)
    monkeypatch.setattr(filesystem_sync, "syncfs", failing)
    async with running(tmp_path) as logs:
        opened = open_parts(logs, 2)
        parts = [p for p, _ in opened]
        assert await one_pass(logs, parts) == [False, False]
        assert failing.calls == 1
        for part, owner in opened:
            assert part.failed
            assert part.high_watermark == 0 and part.log.recovery_point == 0
            assert len(owner.failures) == 1 and isinstance(owner.failures[0], OSError)
            # Its segments were handed back to the next flush, which finds them unsynced.
            assert part.log.active_segment.unsynced


def in_memory(*args: Any, **kwargs: Any) -> tuple[PartitionLog, Any]:
    """An opener other than the files' own (as a test's in-memory logs have)."""
    return PartitionLog.open(*args, **kwargs)


def test_which_runtimes_choose_syncfs(tmp_path: Path) -> None:
    """By itself, on a local filesystem it knows, a cluster's volume shared by the node processes
    of one host included; never for logs that are not files of the data directory."""
    own = LogRuntime(tmp_path / "own", LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None)
    shared = LogRuntime(tmp_path / "shared", LogConfig(), sync_flush=True, flush_interval_ms=1000,
                        cleaner_backoff_ms=None, shared=True)
    fake = LogRuntime(tmp_path / "fake", LogConfig(), sync_flush=True, flush_interval_ms=1000,
                      cleaner_backoff_ms=None, opener=in_memory)
    try:
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            local = filesystem_sync.suited(fd)
        finally:
            os.close(fd)
        assert (own.fs_fd is not None) == local
        assert (shared.fs_fd is not None) == local
        assert fake.fs_fd is None
    finally:
        own.close()
        shared.close()
        fake.close()
