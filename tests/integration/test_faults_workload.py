"""The fault workload's clients each run in a process of their own (testkit/faults/processes.py):
a consumer whose librdkafka handle stops (here its process is stopped with SIGSTOP, as a handle
deadlocked inside the library stops sending statistics) is seen by the runner, stopped, written
into the history as ``wedged`` and replaced by a new member of its group, which takes the
partitions over and reads on; the checker counts it and finds no violation in the holdings."""

from __future__ import annotations

import itertools
import os
import signal
import time

from testkit.faults.checker import _overlaps
from testkit.faults.history import History
from testkit.faults.runner import PLAIN_PARTITIONS, PLAIN_TOPIC, Workload
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic, wait_for


def test_a_wedged_consumer_is_replaced_by_a_new_member_that_reads_on(broker: BrokerProcess) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    create_topic(bootstrap, PLAIN_TOPIC, PLAIN_PARTITIONS)
    history = History()
    lines: list[str] = []
    workload = Workload(history, bootstrap, 0, lines.append, wedged_after=4.0)
    workload.consumers = workload.consumers[:1]  # a-1 alone in fault-group-a
    workload.producers = workload.producers[:1]
    member = workload.consumers[0]
    try:
        for c in [*workload.producers, member]:
            c.start()
        wait_for(lambda: len(member.assignment) == PLAIN_PARTITIONS and member.reads > 0, 60,
                 "a-1 assigned every partition and reading")
        os.kill(member.child.pid, signal.SIGSTOP)  # no statistics from it from now on
        assert workload.wait(lambda: workload.consumers[0] is not member, time.monotonic() + 60), lines
        successor = workload.consumers[0]
        assert successor.client_name == "a-1.1"
        assert not member.is_alive()  # the wedged process was ended, not left behind
        read_before = successor.reads
        assert workload.wait(lambda: len(successor.assignment) == PLAIN_PARTITIONS and successor.reads > read_before,
                             time.monotonic() + 90), (lines, successor.assignment)
        assert any("a-1 wedged: no statistics from librdkafka" in line for line in lines), lines
    finally:
        workload.kill()
    ops = history.snapshot()
    wedged = [op for op in ops if op.f == "wedged"]
    assert [(op.process, op.group) for op in wedged] == [("a-1", "fault-group-a")]
    assigned = [op for op in ops if op.f == "assign" and op.process == "a-1.1" and op.assignment]
    assert assigned and assigned[0].time > wedged[0].time
    assert _overlaps(ops, ops[-1].time) == []
    assert [op.index for op in ops] == list(range(len(ops)))
    assert all(a.time <= b.time for a, b in itertools.pairwise(ops))
