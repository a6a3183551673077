"""A cluster node serves a partition under one claim at a time: a log opened for a claim that ended
before the opening finished (the node lost the partition and claimed it again meanwhile) serves
nothing; the later claim opens the log afresh, at its own epoch."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import cast

import pytest
import trio

from broker.cluster.node import ClusterNode
from broker.log_runtime.runtime import LogRuntime
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import TopicLogs
from storage.config import LogConfig
from storage.fencing import REVOKED, Fence

Key = tuple[str, int]


class Claims:
    """The part of a cluster node the topic logs ask: which claims this node holds."""

    def __init__(self) -> None:
        self.fences: dict[Key, Fence] = {}
        self.mine: dict[Key, int] = {}
        self.owners: dict[Key, object] = {}
        self.lease_trusted = True  # may_write: false while the lease could have expired
        self.relinquished: list[Key] = []

    def claim(self, key: Key, epoch: int) -> None:
        self.fences[key] = Fence(f"{key[0]}-{key[1]}", epoch)
        self.mine[key] = epoch

    def lose(self, key: Key) -> None:
        self.fences.pop(key).revoke()
        self.mine.pop(key)

    def owns(self, key: Key) -> bool:
        return key in self.mine and self.lease_trusted

    def fence_for(self, key: Key) -> Fence:
        return self.fences.get(key, REVOKED)

    def poke(self) -> None:
        pass

    def relinquish(self, key: Key, reason: str) -> None:
        del reason
        self.relinquished.append(key)
        if key in self.mine:
            self.lose(key)


@pytest.mark.trio
async def test_a_claim_that_ended_while_its_log_opened_does_not_serve_the_next_claim(tmp_path: Path) -> None:
    claims = Claims()
    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None,
                         shared=True)
    # The worker thread that opens the log of the first claim is held up before it starts (a node
    # stopped, a busy thread pool) while the claim is lost and the partition claimed again.
    started, go = threading.Event(), threading.Event()
    first = [True]

    def fence_for(topic: str, index: int) -> Fence:
        if first[0]:
            first[0] = False
            started.set()
            go.wait(10)
        return claims.fence_for((topic, index))

    runtime.fence_for = fence_for
    logs = TopicLogs(runtime, TopicCatalog(tmp_path, 1), max_message_bytes=1 << 20,
                     cluster=cast(ClusterNode, claims))
    logs.catalog.create("t", 1)
    key = ("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        claims.claim(key, 3)
        nursery.start_soon(logs.gain, key, 3)
        with trio.fail_after(10):
            await trio.to_thread.run_sync(started.wait)
        claims.lose(key)
        logs.lose(key)
        claims.claim(key, 9)
        nursery.start_soon(logs.gain, key, 9)
        go.set()
        with trio.fail_after(10):
            while logs.states.get(key) is None:
                await trio.sleep(0.01)
        state = logs.states[key]
        assert state.part.fence is claims.fence_for(key)
        assert state.log.leader_epoch == 9
        nursery.cancel_scope.cancel()
    runtime.close()


def served_or_handed_back(logs: TopicLogs, claims: Claims, key: Key) -> bool:
    """Never claimed and unserved: Metadata would name this node the leader of a partition it
    answers NOT_LEADER_OR_FOLLOWER for, for as long as the claim lasts."""
    return key in logs.states or key not in claims.mine


def make(tmp_path: Path) -> tuple[Claims, LogRuntime, TopicLogs]:
    claims = Claims()
    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None,
                         shared=True)
    runtime.fence_for = lambda topic, index: claims.fence_for((topic, index))
    logs = TopicLogs(runtime, TopicCatalog(tmp_path, 1), max_message_bytes=1 << 20,
                     cluster=cast(ClusterNode, claims))
    logs.catalog.create("t", 1)
    return claims, runtime, logs


@pytest.mark.trio
async def test_a_claim_that_cannot_open_while_the_lease_is_in_doubt_is_handed_back(tmp_path: Path) -> None:
    claims, runtime, logs = make(tmp_path)
    key = ("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        claims.claim(key, 3)
        claims.lease_trusted = False  # a renewal late a moment (a loaded host, a resumed process)
        await logs.gain(key, 3)
        claims.lease_trusted = True
        assert served_or_handed_back(logs, claims, key) and claims.relinquished == [key]
        nursery.cancel_scope.cancel()
    runtime.close()


@pytest.mark.trio
async def test_a_reopen_while_the_lease_is_in_doubt_hands_the_claim_back(tmp_path: Path) -> None:
    claims, runtime, logs = make(tmp_path)
    key = ("t", 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        claims.claim(key, 3)
        await logs.gain(key, 3)
        state = logs.states[key]
        # A write failed; the reopen that follows runs while the lease cannot be trusted.
        logs._recover(state)
        claims.lease_trusted = False
        with trio.fail_after(10):
            while key in logs.states:
                await trio.sleep(0.01)
        claims.lease_trusted = True
        assert served_or_handed_back(logs, claims, key) and claims.relinquished == [key]
        nursery.cancel_scope.cancel()
    runtime.close()
