"""Session timeouts fire on trio's clock, and what they change is shown once it is durable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio.testing

from broker.coordinators.group.core.base.records import GroupMetadataRecord
from protocol.errors import ErrorCode
from tests.unit.runtime.inproc import EPOCH_MS, OFFSETS_LOG, describe, join, running_broker, sync

pytestmark = pytest.mark.timeout(60)
SESSION_MS = 10_000


def _state(response: Any) -> tuple[str, list[str]]:
    """(state, member ids) of the one group a DescribeGroups answer describes."""
    (group,) = response.groups
    assert group.error_code == 0
    return group.group_state, [m.member_id for m in group.members]


@pytest.mark.trio
async def test_a_silent_member_leaves_after_its_session_timeout(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock) as node:
        disk = node.disk
        member, admin = node.connect(), node.connect()
        first = await member.call(join("g", session_ms=SESSION_MS))
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        me = first.member_id
        joined = await member.call(join("g", me, session_ms=SESSION_MS))
        assert (joined.error_code, joined.leader) == (0, me)
        assert (await member.call(sync("g", me, joined.generation_id, {me: b"partitions"}))).error_code == 0
        assert _state(await admin.call(describe("g"))) == ("Stable", [me])

        # The member never heartbeats. A millisecond before its session ends it is still there.
        mock_clock.jump((SESSION_MS - 1) / 1000)
        await trio.testing.wait_all_tasks_blocked()
        assert _state(await admin.call(describe("g"))) == ("Stable", [me])

        # At the deadline the member is removed and the emptied group is written; while that
        # write is on its way to the disk, a describe does not answer from it.
        flushes = disk.flush_calls.value
        disk.hold_flushes()
        mock_clock.jump(0.001)
        await disk.flush_calls.reach(flushes + 1)
        removal = disk.records(OFFSETS_LOG)[-1]
        assert isinstance(removal, GroupMetadataRecord) and removal.value is not None
        assert removal.value.members == []
        assert removal.value.current_state_timestamp == EPOCH_MS + SESSION_MS
        admin.send(describe("g"))
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert not admin.has_answer()

        disk.release_flushes()
        assert _state((await admin.recv())[1]) == ("Empty", [])
        assert disk.records(OFFSETS_LOG, durable_only=True)[-1] == removal
