"""Reads show durable state only: what a monitor saw is still there after kill -9.

Committers pipeline OffsetCommits with rising offsets while an observer on its own connection
polls OffsetFetch (and DescribeGroups) as fast as it can; the broker is killed mid-storm. After a
restart, no offset the observer ever saw may exceed what the broker returns, and no group the
observer saw may be missing. A read that answered from commits still queued in memory (applied to
the shard, not yet written) fails this: the kill takes those commits away.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from tests.integration.helpers.clients import create_topic

pytestmark = pytest.mark.timeout(240)

# Groups spread over many shards: a pass then flushes many logs, and commits queue behind it.
GROUPS = [f"storm-{i}" for i in range(24)]
COMMITTERS = 6
PARTITIONS = 4
IN_FLIGHT = 16
ROUNDS = 2


def _commit_body(group: str, topic: str, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[OffsetCommitRequest.Topic(
            name=topic, partitions=[OffsetCommitRequest.Topic.Partition(partition_index=p, committed_offset=offset)
                                    for p in range(PARTITIONS)])])


def _storm(port: int, groups: list[str], topic: str, start: int, stop: threading.Event) -> None:
    """Pipelined commits of ever larger offsets (from ``start``, above every earlier round's) to
    ``groups`` in turn, IN_FLIGHT at a time, until the broker dies."""
    offset = start
    try:
        with WireClient("127.0.0.1", port, client_id="committer") as c:
            outstanding: list[int] = []
            while not stop.is_set():
                while len(outstanding) < IN_FLIGHT:
                    offset += 1
                    group = groups[offset % len(groups)]
                    outstanding.append(c.send(ApiKey.OffsetCommit, 8, _commit_body(group, topic, offset)))
                c.recv(ApiKey.OffsetCommit, 8, outstanding.pop(0))
    except (OSError, ConnectionError):
        pass  # killed


def _observe(port: int, pid: int, kill_after: float, seen: dict[tuple[str, int], int], groups_seen: set[str],
             stop: threading.Event) -> None:
    """Polls OffsetFetch and DescribeGroups; after ``kill_after`` seconds it kills the broker the
    instant an answer arrives, so whatever that answer showed had no time to become durable
    unless it already was."""
    deadline = time.monotonic() + kill_after
    try:
        with WireClient("127.0.0.1", port, client_id="monitor") as c:
            fetch = OffsetFetchRequest(groups=[OffsetFetchRequest.Group(group_id=g, topics=None) for g in GROUPS])
            while not stop.is_set():
                resp = c.call(ApiKey.OffsetFetch, 8, fetch)
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                for g in resp.groups:
                    for t in g.topics:
                        for p in t.partitions:
                            key = (g.group_id, p.partition_index)
                            seen[key] = max(seen.get(key, -1), p.committed_offset)
                if time.monotonic() >= deadline:
                    return
                described = c.call(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=GROUPS))
                groups_seen.update(d.group_id for d in described.groups if d.group_state != "Dead")
    except (OSError, ConnectionError):
        pass


def _fetch_all(port: int) -> dict[tuple[str, int], int]:
    with WireClient("127.0.0.1", port) as c:
        resp = c.call(ApiKey.OffsetFetch, 8, OffsetFetchRequest(groups=[
            OffsetFetchRequest.Group(group_id=g, topics=None) for g in GROUPS]))
    return {(g.group_id, p.partition_index): p.committed_offset
            for g in resp.groups for t in g.topics for p in t.partitions}


def test_nothing_a_monitor_saw_is_lost_by_kill_9(broker_factory) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "storm", PARTITIONS)
    checked = 0
    for round_no in range(ROUNDS):
        seen: dict[tuple[str, int], int] = {}
        groups_seen: set[str] = set()
        stop = threading.Event()
        start = round_no * 10**9  # above every offset of earlier rounds
        threads = [threading.Thread(target=_storm, args=(b.port, GROUPS[i::COMMITTERS], "storm", start, stop))
                   for i in range(COMMITTERS)]
        observer = threading.Thread(target=_observe, args=(b.port, b.proc.pid, 1.0 + 0.3 * round_no, seen,
                                                           groups_seen, stop))
        for t in [*threads, observer]:
            t.start()
        observer.join(30)  # it kills the broker mid-storm, right after an answer
        b.kill()
        stop.set()
        for t in threads:
            t.join(10)
        assert seen, "the monitor observed nothing"
        b.start()
        b.wait_loaded()
        after = _fetch_all(b.port)
        lost = {k: (v, after.get(k, -1)) for k, v in seen.items() if v > after.get(k, -1)}
        assert not lost, f"round {round_no}: observed offsets gone after kill -9 (seen, now): {lost}"
        with WireClient("127.0.0.1", b.port) as c:
            described = c.call(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=sorted(groups_seen)))
        assert all(d.group_state != "Dead" for d in described.groups), "a group the monitor saw is gone"
        checked += len(seen)
    assert checked >= ROUNDS * len(GROUPS) * PARTITIONS
