"""An answer the sync thread sends itself (``LogRuntime.send_when_durable``) leaves only once the
partition's high watermark covers the write it acknowledges: the client may read the log at once
(a Fetch of __consumer_offsets right after its OffsetCommit) and must find the write there, even
before the event loop has settled the pass."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

from broker.log_runtime.runtime import LogRuntime
from storage import filesystem_sync
from storage.config import LogConfig

pytestmark = [pytest.mark.trio, pytest.mark.timeout(30)]


class Owner:
    def on_write_failed(self, exc: Exception) -> None:
        raise AssertionError(f"the write failed: {exc!r}")


class LentAnswer:
    """A reply the pass's thread may write to ``fd`` itself."""

    def __init__(self, fd: int, data: bytes) -> None:
        self.fd = fd
        self.data = data
        self.came_back: tuple[int, bool] | None = None
        self.back = trio.Event()

    def lend(self) -> tuple[int, bytes] | None:
        return self.fd, self.data

    def returned(self, sent: int, durable: bool, sent_at: float = 0.0) -> None:
        self.came_back = (sent, durable)
        self.back.set()


@pytest.mark.parametrize("fs_sync", [False, True], ids=["fdatasync", "syncfs"])
async def test_the_high_watermark_covers_a_write_before_its_lent_answer_leaves(tmp_path: Path,
                                                                                fs_sync: bool) -> None:
    if fs_sync and not filesystem_sync.available():
        pytest.skip("no syncfs that reports errors here")
    logs = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None,
                      fs_sync=fs_sync)
    client, server = socket.socketpair()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(logs.run)
            parts = [logs.adopt(logs.open("__consumer_offsets", i, owner=Owner())) for i in range(2)]
            answer = LentAnswer(server.fileno(), b"committed")
            # Two partitions in the pass: where syncfs is available, one syncfs makes both durable.
            for part in parts:
                logs.append_records(part, [(b"key", b"value", 1000), (b"key", b"value2", 1001)])
            logs.send_when_durable(parts[0], answer)
            logs.kick()
            # The event loop is held here, in a blocking read on its own thread, until the answer
            # arrives: whatever the high watermark says now, the loop has not settled the pass.
            client.settimeout(10)
            assert client.recv(100) == b"committed"
            assert parts[0].high_watermark == 2, "the answer left before a read could see its write"
            with trio.fail_after(10):
                await answer.back.wait()
            assert answer.came_back == (len(b"committed"), True)
            assert [p.high_watermark for p in parts] == [2, 2]
            nursery.cancel_scope.cancel()
    finally:
        logs.close()
        client.close()
        server.close()
