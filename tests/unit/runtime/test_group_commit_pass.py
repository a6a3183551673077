"""Group commit: writes that arrive while a flush is in progress share the next one."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio.testing

from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Router
from protocol.messages import ApiKey
from tests.unit.runtime.inproc import (
    OFFSETS_LOG,
    Call,
    commit,
    commit_code,
    decode_reply,
    encode_request,
    running_broker,
)

pytestmark = pytest.mark.timeout(60)


def dispatch(router: Router, conn_id: int, call: Call) -> Reply:
    """One request as connection ``conn_id``'s reader hands it over: dispatched, then the
    end-of-read hook that starts the writes it queued."""
    reply = router.dispatch(encode_request(1, call)[4:], ConnectionInfo(conn_id, "127.0.0.1", 40_000 + conn_id))
    router.after_frames()
    return reply


async def until_filled(*replies: Reply) -> None:
    for reply in replies:
        if not reply.ready:
            filled = trio.Event()
            reply.on_ready = filled.set
            await filled.wait()


@pytest.mark.trio
async def test_commits_arriving_during_a_flush_share_the_next_one(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        disk, router = node.disk, node.broker.router
        disk.hold_flushes()
        first = dispatch(router, 1, commit("g1", 100))
        await disk.flush_calls.reach(1)

        # Three more commits from three other connections while that flush is on the disk.
        later = [dispatch(router, conn, commit(f"g{conn}", 100 + conn)) for conn in (2, 3, 4)]
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert not any(r.ready for r in [first, *later])
        assert disk.flush_calls.value == 1  # no second pass while the first is in flight
        assert disk.appends == [(OFFSETS_LOG, 0, 0)]

        # The first flush returns: its commit is answered and the three go out as one batch...
        disk.let_flushes_through(1)
        await until_filled(first)
        await disk.flush_calls.reach(2)
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert disk.appends == [(OFFSETS_LOG, 0, 0), (OFFSETS_LOG, 1, 3)]
        # ...whose one flush answers all three.
        assert not any(r.ready for r in later)
        disk.release_flushes()
        await until_filled(*later)
        assert [(f.log, f.end_offset) for f in disk.flushes] == [(OFFSETS_LOG, 1), (OFFSETS_LOG, 4)]
        assert disk.flush_calls.value == 2
        assert [commit_code(decode_reply(ApiKey.OffsetCommit, r)) for r in [first, *later]] == [0, 0, 0, 0]
