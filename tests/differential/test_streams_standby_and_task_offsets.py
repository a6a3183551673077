"""Streams groups against Apache Kafka 4.4: what a member reports besides its tasks (task offsets
and end offsets, described; a task named twice, or owned outside the topology, refused), the client
tags a group's ``streams.rack.aware.assignment.tags`` asks for (MISSING_CLIENT_TAGS; the tags do
not move a task in either broker's assignor), standby copies taking over the tasks of a member that
leaves, and real Kafka Streams 4.4 applications: one with a regular-expression source, one with
standby replicas."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Req
from tests.differential.config_ops import GROUP, SET, incremental, settle
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import create_topic
from tests.differential.streams_ops import Member, describe, until_tasks
from tests.integration.helpers.java import compiled_java
from tests.integration.helpers.streams_app import Instance

pytestmark = pytest.mark.differential


def offsets(*entries: tuple[str, int, int]) -> list[Any]:
    return [Req.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in entries]


def members(c: WireClient, group: str) -> dict[str, dict[str, Any]]:
    answer: StreamsGroupDescribeResponse = c.call(89, 0, StreamsGroupDescribeRequest(group_ids=[group]))

    def listed(entries: list[Any]) -> list[tuple[str, int, int]]:
        return [(t.subtopology_id, t.partition, t.offset) for t in entries]

    def tasks(ids: list[Any]) -> dict[str, list[int]]:
        return {t.subtopology_id: sorted(t.partitions) for t in ids if t.partitions}
    return {m.member_id: {"task_offsets": listed(m.task_offsets), "task_end_offsets": listed(m.task_end_offsets),
                          "client_tags": sorted((kv.key, kv.value) for kv in m.client_tags),
                          "active": tasks(m.assignment.active_tasks if m.assignment else []),
                          "standby": tasks(m.assignment.standby_tasks if m.assignment else [])}
            for m in answer.groups[0].members}


def drive(ms: list[Member], done: Any, timeout: float = 60.0) -> None:
    """Heartbeats every member until ``done`` holds (each step's timing is the brokers')."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done():
        for m in ms:
            m.heartbeat()
        time.sleep(0.2)


def test_task_offsets_are_described_duplicates_and_unknown_tasks_refused_and_missing_tags_told(pair: Pair) -> None:
    group, source = unique("streams-offsets"), unique("streams-offsets-in")

    def scenario(t: Target) -> object:
        c = t.client("streams")
        create_topic(c, source, 2)
        steps: dict[str, object] = {"tags": incremental(c, GROUP, group, ("streams.rack.aware.assignment.tags", SET,
                                                                             "zone"))}
        settle(t)
        a, b = Member(c, group, source, "a"), Member(c, group, source, "b")
        # The heartbeat that creates the group: what it reports is not kept (Kafka 4.4 keeps it
        # on a group object that the replay of the new group's records replaces).
        joined = a.heartbeat(task_offsets=offsets(("1", 1, 3)), client_tags=[Req.KeyValue(key="zone", value="z1")])
        steps["a_statuses"] = sorted(s.status_code for s in joined.status or [] if s.status_code != 5)
        until_tasks(a)
        steps["first_lost"] = members(c, group)[a.mid]["task_offsets"]
        a.heartbeat(task_offsets=offsets(("1", 1, 7), ("1", 0, 5)), task_end_offsets=offsets(("1", 0, 9)))
        told = b.heartbeat()
        steps["b_told"] = sorted((s.status_code, s.status_detail) for s in told.status or [] if s.status_code == 6)
        steps["updated"] = a.heartbeat(task_end_offsets=offsets(("1", 0, 12))).error_code
        described = members(c, group)
        steps["described"] = [described[a.mid], {k: v for k, v in described[b.mid].items()
                                                 if k not in ("active", "standby")}]
        dup = a.heartbeat(task_offsets=offsets(("1", 0, 5), ("1", 0, 6)))
        unknown = a.heartbeat(active_tasks=[Req.TaskIds(subtopology_id="7", partitions=[0])])
        beyond = a.heartbeat(standby_tasks=[Req.TaskIds(subtopology_id="1", partitions=[2])])
        steps |= {"duplicate": (dup.error_code, dup.error_message), "unknown": (unknown.error_code, unknown.error_message),
                  "beyond": (beyond.error_code, beyond.error_message),
                  "kept": members(c, group)[a.mid]["task_offsets"]}
        b.heartbeat(epoch=-1)
        a.heartbeat(epoch=-1)
        return steps

    answers: Any = pair.compare(scenario)
    assert answers["described"][0]["task_offsets"] == [["1", 0, 5], ["1", 1, 7]]
    assert answers["described"][0]["task_end_offsets"] == [["1", 0, 12]]
    assert answers["duplicate"] == [42, "Task offsets contain a duplicate entry for subtopology 1 and partition 0."]
    assert answers["b_told"] and answers["b_told"][0][0] == 6


def test_standby_copies_take_over_the_tasks_of_a_member_that_leaves(pair: Pair) -> None:
    """Three members on three processes with one standby replica: once stable, one leaves; the
    stateful tasks it ran go to the members holding their standby copies, on both brokers."""
    group, source = unique("streams-standby"), unique("streams-standby-in")

    def scenario(t: Target) -> object:
        c = t.client("streams")
        create_topic(c, source, 3)
        incremental(c, GROUP, group, ("streams.num.standby.replicas", SET, "1"))
        settle(t)
        ms = [Member(c, group, source, seed) for seed in "abc"]
        until_tasks(ms[0])

        def stable() -> bool:
            d = members(c, group)
            return (describe(c, group)["state"] == "Stable" and len(d) == 3
                    and sum(len(p) for m in d.values() for p in m["standby"].values()) == 3)
        drive(ms, stable)
        was_stable = stable()
        before = members(c, group)
        leaver = ms[2]
        ran = {(s, p) for s, parts in before[leaver.mid]["active"].items() for p in parts if s == "1"}
        copies = {(s, p): mid for mid, m in before.items() for s, parts in m["standby"].items() for p in parts}
        leaver.heartbeat(epoch=-1)
        drive(ms[:2], lambda: describe(c, group)["state"] == "Stable" and all(
            members(c, group)[m.mid]["active"] for m in ms[:2]))
        after = members(c, group)
        held = {(s, p): mid for mid, m in after.items() for s, parts in m["active"].items() for p in parts}
        return {"stable": was_stable, "leaver_ran_stateful": bool(ran),
                "taken_by_copy_holders": all(held.get(task) == copies.get(task) for task in ran),
                "every_task_once": sorted(held) == sorted((s, p) for s in "01" for p in range(3)),
                "standby_elsewhere": all(not (set(m["active"].get("1", [])) & set(m["standby"].get("1", [])))
                                         for m in after.values())}

    answers: Any = pair.compare(scenario)
    assert answers["taken_by_copy_holders"] is True and answers["every_task_once"] is True


# ---- real Kafka Streams 4.4 applications ---------------------------------------------------------

@pytest.fixture(scope="module")
def java_classes(kafka_libs: Path) -> Path:
    return compiled_java(kafka_libs)


def test_kafka_streams_apps_with_a_regex_source_and_with_standby_replicas(
        pair: Pair, kafka_libs: Path, java_classes: Path, tmp_path: Path) -> None:
    """A word count reading its sources by regular expression fails as Kafka Streams 4.4 fails it
    on the streams protocol (it refuses the pattern itself, before any heartbeat: no group on either
    broker); two instances of the
    word count with one standby replica run every task once, each stateful task with a standby copy
    on the other instance, and one closing hands its tasks to the other."""
    stamp = unique("streams-apps")

    def scenario(t: Target) -> object:
        c = t.client("setup")
        regex_app, app = f"{stamp}-regex", f"{stamp}-standby"
        source, sink = f"{stamp}-in", f"{stamp}-out"
        for topic in (source, sink):
            create_topic(c, topic, 2 if topic == source else 1)
        incremental(c, GROUP, app, ("streams.num.standby.replicas", SET, "1"),
                    ("streams.initial.rebalance.delay.ms", SET, "0"))
        settle(t)
        bootstrap = f"{t.host}:{t.port}"
        started: list[Instance] = []
        try:
            regex = Instance(java_classes, kafka_libs, bootstrap, regex_app, (f"{stamp}-i.*", sink),
                             tmp_path / f"{t.name}-regex", tmp_path / f"{t.name}-regex.log", "regex")
            started.append(regex)
            exited = retry(lambda: regex.proc.poll() is not None, bool, timeout=90)
            log = (tmp_path / f"{t.name}-regex.log").read_text()
            failed = {"exited": exited, "error": [line for line in log.splitlines() if "Exception" in line][:1],
                      "group": describe(c, regex_app)["error_code"]}
            for n in range(2):
                started.append(Instance(java_classes, kafka_libs, bootstrap, app, (source, sink),
                                        tmp_path / f"{t.name}-{n}", tmp_path / f"{t.name}-{n}.log"))
            live = started[1:]
            stateful = {"1_0", "1_1"}

            def spread() -> bool:
                owned = [task for i in live for task in i.active]
                standby = [task for i in live for task in i.standby]
                return (all(i.running() and i.active for i in live) and sorted(owned) == sorted(
                    {"0_0", "0_1"} | stateful) and sorted(standby) == sorted(stateful)
                    and all(not (i.active & i.standby) for i in live))
            spread_ok = retry(spread, bool, timeout=120)
            live[1].stop()
            took_over = retry(lambda: live[0].active == {"0_0", "0_1"} | stateful, bool, timeout=120)
            return {"regex": failed, "spread": spread_ok, "took_over": took_over}
        finally:
            for i in started:
                i.stop()

    answers: Any = pair.compare(scenario)
    assert "Pattern subscriptions are not supported with the STREAMS protocol" in answers["regex"]["error"][0]
    assert answers["regex"]["group"] == 69  # GROUP_ID_NOT_FOUND: no heartbeat reached the broker
    assert answers["spread"] is True and answers["took_over"] is True
