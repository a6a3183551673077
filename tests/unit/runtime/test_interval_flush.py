"""``log.flush.policy=interval``: replies and reads do not wait for a flush, the logs are flushed
every ``log.flush.interval.ms`` of (mock) time, and a failed periodic flush gets the failure policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio.testing

from broker.coordinators.group.service.coordinator import RELOAD_DELAY_S
from protocol.errors import ErrorCode
from tests.unit.runtime.fake_log import Flush
from tests.unit.runtime.inproc import (
    OFFSETS_LOG,
    commit,
    commit_code,
    committed,
    offset_fetch,
    running_broker,
)

INTERVAL = {"log.flush.policy": "interval", "log.flush.interval.ms": "1000"}
# Real seconds a negative check gives worker threads to report a flush they might have started.
QUIET_S = 0.05

pytestmark = pytest.mark.timeout(60)


@pytest.mark.trio
async def test_replies_leave_before_the_flush_which_runs_on_schedule(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock, INTERVAL) as node:
        disk = node.disk
        committer, reader = node.connect(), node.connect()
        assert trio.current_time() == 0.0  # the flusher's period started with the broker

        assert commit_code(await committer.call(commit("g", 5))) == 0
        assert committed(await reader.call(offset_fetch("g"))) == (0, {0: 5})
        assert disk.appends == [(OFFSETS_LOG, 0, 0)]
        assert disk.flush_calls.value == 0

        mock_clock.jump(0.999)
        await trio.testing.wait_all_tasks_blocked(QUIET_S)
        assert disk.flush_calls.value == 0
        mock_clock.jump(0.001)
        await disk.flushed.reach(1)
        assert disk.flushes == [Flush(OFFSETS_LOG, 1, 1.0)]
        await node.until_asleep_until(2.0)  # the flusher's next period starts once its flush returns

        # The next period starts when this flush is done; a write in it is flushed at its end.
        assert commit_code(await committer.call(commit("g", 6))) == 0
        mock_clock.jump(0.999)
        await trio.testing.wait_all_tasks_blocked(QUIET_S)
        assert disk.flush_calls.value == 1
        mock_clock.jump(0.001)
        await disk.flushed.reach(2)
        assert disk.flushes[1:] == [Flush(OFFSETS_LOG, 2, 2.0)]

        # A period with nothing written flushes nothing.
        await node.until_asleep_until(3.0)
        mock_clock.jump(1.0)
        await trio.testing.wait_all_tasks_blocked(QUIET_S)
        assert disk.flush_calls.value == 2


@pytest.mark.trio
async def test_a_failed_periodic_flush_rebuilds_the_shard_from_its_log(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_broker(tmp_path, mock_clock, INTERVAL) as node:
        disk = node.disk
        committer, reader = node.connect(), node.connect()
        assert commit_code(await committer.call(commit("g", 5))) == 0
        mock_clock.jump(1.0)
        await disk.flushed.reach(1)
        await node.until_asleep_until(2.0)
        assert commit_code(await committer.call(commit("g", 6))) == 0

        disk.fail_flushes()
        mock_clock.jump(1.0)
        await disk.flushed.reach(2)
        await node.until_asleep_until(2.0 + RELOAD_DELAY_S)  # the failure policy has run
        # The log could not make offset 6 durable: the shard stops serving what it cannot vouch
        # for, and takes no writes on top of a log in an unknown state.
        assert committed(await reader.call(offset_fetch("g")))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert commit_code(await committer.call(commit("g", 7))) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

        disk.fail_flushes(False)
        opens = disk.opens.value
        mock_clock.jump(RELOAD_DELAY_S)
        await disk.opens.reach(opens + 1)
        await node.until_loaded()
        # What the log holds: the flushed commit, not the one whose flush failed.
        assert committed(await reader.call(offset_fetch("g"))) == (0, {0: 5})
        assert commit_code(await committer.call(commit("g", 8))) == 0
        assert committed(await reader.call(offset_fetch("g"))) == (0, {0: 8})
