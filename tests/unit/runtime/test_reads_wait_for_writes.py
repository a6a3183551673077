"""Reads on one connection never show a write in flight on another: OffsetFetch, DescribeGroups
and ListGroups answer once every write they could see is durable, and after a failed flush they
show only what the log holds."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio.testing

from broker.coordinators.group.core.base.records import OffsetCommitRecord
from broker.coordinators.group.service.coordinator import RELOAD_DELAY_S
from protocol.errors import ErrorCode
from tests.unit.runtime.inproc import (
    OFFSETS_LOG,
    Client,
    Node,
    commit,
    commit_code,
    committed,
    describe,
    heartbeat,
    join,
    list_groups,
    offset_fetch,
    running_broker,
    sync,
)

pytestmark = pytest.mark.timeout(60)


async def _in_flight(node: Node, committer: Client, offset: int) -> int:
    """Sends a commit whose flush is held; returns its correlation id once the flush is waiting."""
    calls = node.disk.flush_calls.value
    node.disk.hold_flushes()
    (sent,) = committer.send(commit("g", offset))
    await node.disk.flush_calls.reach(calls + 1)
    return sent


@pytest.mark.trio
async def test_offset_fetch_waits_for_a_commit_in_flight(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        committer, reader = node.connect(), node.connect()
        assert commit_code(await committer.call(commit("g", 5))) == 0

        await _in_flight(node, committer, 10)
        reader.send(offset_fetch("g"))
        await trio.testing.wait_all_tasks_blocked()
        assert not reader.has_answer()  # it would show 10, which a crash could still take away
        assert not committer.has_answer()

        node.disk.release_flushes()
        assert commit_code((await committer.recv())[1]) == 0
        assert committed((await reader.recv())[1]) == (0, {0: 10})


@pytest.mark.trio
@pytest.mark.parametrize("tail_survives", [False, True], ids=["tail-lost", "tail-kept"])
async def test_failed_flush_is_never_read(tmp_path: Path, mock_clock: trio.testing.MockClock,
                                          tail_survives: bool) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        disk = node.disk
        committer, reader = node.connect(), node.connect()
        assert commit_code(await committer.call(commit("g", 5))) == 0

        await _in_flight(node, committer, 10)
        reader.send(offset_fetch("g"))
        await trio.testing.wait_all_tasks_blocked()
        assert not reader.has_answer()

        disk.fail_flushes()
        disk.keep_unflushed = tail_survives
        disk.release_flushes()
        # The read that waited on the failed write answers with a coordinator error, never 10.
        assert committed((await reader.recv())[1]) == (ErrorCode.NOT_COORDINATOR, {})
        assert commit_code((await committer.recv())[1]) == ErrorCode.NOT_COORDINATOR

        # The shard rebuilds from its log after a pause; until then reads say it is loading.
        disk.fail_flushes(False)
        assert committed(await reader.call(offset_fetch("g")))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        opens = disk.opens.value
        mock_clock.jump(RELOAD_DELAY_S)
        await disk.opens.reach(opens + 1)
        await node.until_loaded()

        # Reads show exactly what the log holds: the failed commit only if its bytes survived.
        held = [r.value.offset for r in disk.records(OFFSETS_LOG)
                if isinstance(r, OffsetCommitRecord) and r.value is not None]
        assert held == ([5, 10] if tail_survives else [5])
        assert committed(await reader.call(offset_fetch("g"))) == (0, {0: held[-1]})

        # And the shard takes writes again.
        assert commit_code(await committer.call(commit("g", 11))) == 0
        assert committed(await reader.call(offset_fetch("g"))) == (0, {0: 11})


@pytest.mark.trio
@pytest.mark.parametrize("flush_fails", [False, True], ids=["durable", "failed"])
async def test_describe_and_list_groups_wait_for_a_write_in_flight(
        tmp_path: Path, mock_clock: trio.testing.MockClock, flush_fails: bool) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        committer, reader = node.connect(), node.connect()
        # The group comes into being with its first commit: a read must not show it before then.
        await _in_flight(node, committer, 1)
        reader.send(describe("g"), list_groups())
        await trio.testing.wait_all_tasks_blocked()
        assert [r.ready for r in reader.conn.pending] == [False, False]
        assert not reader.has_answer()

        node.disk.fail_flushes(flush_fails)
        node.disk.release_flushes()
        (_, described), (_, listed) = await reader.recv(), await reader.recv()
        if flush_fails:
            assert [(g.group_id, g.error_code) for g in described.groups] == [("g", ErrorCode.NOT_COORDINATOR)]
            assert (listed.error_code, listed.groups) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        else:
            assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [("g", 0, "Empty")]
            assert listed.error_code == 0
            assert [g.group_id for g in listed.groups] == ["g"]


@pytest.mark.trio
async def test_a_write_in_flight_holds_reads_of_its_own_group_only(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    """Every group here lives on the one shard. A commit to "g" in flight holds reads of "g" and
    of the whole shard (ListGroups), not a heartbeat, OffsetFetch or DescribeGroups of "h": their
    answers show nothing of "g", and everything of "h" is already durable."""
    async with running_broker(tmp_path, mock_clock) as node:
        committer, member, reader = node.connect(), node.connect(), node.connect()
        assert commit_code(await committer.call(commit("g", 5))) == 0
        me = (await member.call(join("h"))).member_id
        joined = await member.call(join("h", me))
        assert (await member.call(sync("h", me, joined.generation_id, {me: b""}))).error_code == 0
        assert commit_code(await member.call(commit("h", 7, generation=joined.generation_id, member_id=me))) == 0

        await _in_flight(node, committer, 10)
        assert (await member.call(heartbeat("h", me, joined.generation_id))).error_code == 0
        assert committed(await reader.call(offset_fetch("h"))) == (0, {0: 7})
        (described,) = (await reader.call(describe("h"))).groups
        assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [me])

        reader.send(offset_fetch("g"), list_groups())
        await trio.testing.wait_all_tasks_blocked()
        assert not reader.has_answer()
        node.disk.release_flushes()
        assert commit_code((await committer.recv())[1]) == 0
        assert committed((await reader.recv())[1]) == (0, {0: 10})
        assert sorted(g.group_id for g in (await reader.recv())[1].groups) == ["g", "h"]
