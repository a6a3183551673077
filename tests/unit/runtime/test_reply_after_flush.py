"""A write's reply leaves only once its records are flushed, and replies keep request order."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio.testing

from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from tests.unit.runtime.inproc import (
    OFFSETS_LOG,
    api_versions,
    commit,
    commit_code,
    heartbeat,
    running_broker,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.trio
async def test_commit_reply_waits_for_its_flush(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        disk = node.disk
        client = node.connect()
        disk.hold_flushes()
        client.send(commit("g", 5))
        await disk.flush_calls.reach(1)
        await trio.testing.wait_all_tasks_blocked()
        # The records are in the log, the flush that covers them has not returned: no answer yet.
        assert disk.appends == [(OFFSETS_LOG, 0, 0)]
        assert not client.has_answer()
        assert [r.ready for r in client.conn.pending] == [False]

        disk.release_flushes()
        _, response = await client.recv()
        assert commit_code(response) == 0
        assert [(f.log, f.end_offset) for f in disk.flushes] == [(OFFSETS_LOG, 1)]


@pytest.mark.trio
async def test_pipelined_replies_keep_request_order(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        disk = node.disk
        client = node.connect()
        disk.hold_flushes()
        # One write carrying a commit, then ApiVersions (answered on the spot), then a heartbeat of
        # a member the group does not know (computed at once, but on the shard the commit is
        # writing to, so it is released with the commit).
        ids = client.send(commit("g", 5), api_versions(), heartbeat("g", "nobody", 1))
        await disk.flush_calls.reach(1)
        await trio.testing.wait_all_tasks_blocked()
        assert [r.ready for r in client.conn.pending] == [False, True, False]
        assert not client.has_answer()

        disk.release_flushes()
        answers = [await client.recv() for _ in ids]
        assert [correlation for correlation, _ in answers] == ids
        assert commit_code(answers[0][1]) == 0
        assert answers[1][1].error_code == 0
        assert any(k.api_key == ApiKey.OffsetCommit for k in answers[1][1].api_keys)
        assert answers[2][1].error_code == ErrorCode.UNKNOWN_MEMBER_ID
