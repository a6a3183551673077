"""The fault checker on hand-made histories: a clean history passes, and each kind of violation
is found (so a run that reports none could have reported one)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from testkit.faults.checker import (
    PartitionRead,
    ReadBack,
    check,
    dump_readback,
    load_readback,
    report,
    window,
)
from testkit.faults.history import History, Op
from testkit.faults.nemesis import SKEWS, schedule

T, X = "log", "txn"


class H:
    """A history under construction, time advancing 0.1 s per op unless told."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = 0.0

    def add(self, process: str, type_: str, f: str, at: float | None = None, **fields: object) -> Op:
        self.t = at if at is not None else self.t + 0.1
        op = Op(len(self.ops), self.t, process, type_, f, **fields)  # type: ignore[arg-type]
        self.ops.append(op)
        return op

    def send(self, process: str, partition: int, offset: int | None, value: str, topic: str = T,
             txn: int | None = None) -> None:
        self.add(process, "invoke", "send", topic=topic, partition=partition, value=value, txn=txn)
        if offset is not None:
            self.add(process, "ok", "send", topic=topic, partition=partition, offset=offset, value=value, txn=txn)


def clean() -> tuple[H, ReadBack]:
    """Two producers, a transaction committed and one aborted, a group of two members that
    rebalances once (revoked before reassigned), commits that only grow, all read to the end."""
    h = H()
    h.add("idem", "info", "client", value="idempotent")
    h.add("plain", "info", "client", value="plain")
    h.add("tx", "info", "client", value="transactional")
    h.add("c1", "ok", "assign", group="g", generation=1, assignment=[(T, 0), (T, 1), (X, 0)])
    h.send("idem", 0, 0, "idem.0.0")
    h.send("idem", 1, 0, "idem.0.1")
    h.send("plain", 0, 1, "plain.0.0")
    h.send("tx", 0, 0, "tx.0.1.0", topic=X, txn=1)
    h.add("tx", "invoke", "txn", txn=1, value="commit")
    h.add("tx", "ok", "txn", txn=1, value="commit")
    h.send("tx", 0, 2, "tx.0.2.0", topic=X, txn=2)
    h.add("tx", "invoke", "txn", txn=2, value="abort")
    h.add("tx", "ok", "txn", txn=2, value="abort")
    h.add("c1", "ok", "poll", group="g", records=[(T, 0, 0, "idem.0.0"), (T, 0, 1, "plain.0.0"),
                                                   (X, 0, 0, "tx.0.1.0")])
    h.add("c1", "invoke", "commit", group="g", generation=1, offsets={"log:0": 2})
    h.add("c1", "ok", "commit", group="g", generation=1, offsets={"log:0": 2})
    h.add("obs", "invoke", "fetch-offsets", group="g")
    h.add("obs", "ok", "fetch-offsets", group="g", offsets={"log:0": 2})
    h.add("c1", "ok", "revoke", group="g", generation=1, assignment=[(T, 0), (T, 1), (X, 0)])
    h.add("c1", "ok", "assign", group="g", generation=2, assignment=[(T, 0), (X, 0)])
    h.add("c2", "ok", "assign", group="g", generation=2, assignment=[(T, 1)])
    h.add("c2", "ok", "poll", group="g", records=[(T, 1, 0, "idem.0.1")])
    h.add("c2", "invoke", "commit", group="g", generation=2, offsets={"log:1": 1})
    h.add("c2", "ok", "commit", group="g", generation=2, offsets={"log:1": 1})
    h.add("nemesis", "info", "fault", value="pause", target="node-1", leaders={"log:0": 1, "log:1": 2})
    h.add("nemesis", "info", "heal", value="pause", target="node-1")
    h.add("nemesis", "info", "quiet")
    h.add("c1", "ok", "position", group="g", offsets={"log:0": 2, "txn:0": 4})
    h.add("c2", "ok", "position", group="g", offsets={"log:1": 1})
    h.add("runner", "info", "end")
    readback = {"log:0": PartitionRead(2, {0: "idem.0.0", 1: "plain.0.0"}),
                "log:1": PartitionRead(1, {0: "idem.0.1"}),
                "txn:0": PartitionRead(4, {0: "tx.0.1.0"})}
    return h, readback


def kinds(h: H, readback: ReadBack) -> dict[str, int]:
    return check(h.ops, readback).by_kind()


def test_a_clean_history_passes() -> None:
    h, rb = clean()
    verdict = check(h.ops, rb)
    assert verdict.ok, report(h.ops, verdict, 0)
    assert verdict.counts["acked writes"] == 5
    assert verdict.counts["transactions committed"] == 1 and verdict.counts["transactions aborted"] == 1
    assert verdict.counts["reads"] == 4 and verdict.counts["commits"] == 2
    assert verdict.faults == {"pause": 1}


def test_an_acknowledged_write_lost_or_changed() -> None:
    h, rb = clean()
    del rb["log:1"].records[0]
    rb["log:1"] = PartitionRead(0, {})
    assert kinds(h, rb).get("lost-write") == 1
    h, rb = clean()
    rb["log:0"].records[1] = "idem.0.0"  # another value at plain.0.0's offset (and a duplicate)
    found = check(h.ops, rb)
    assert {"lost-write", "duplicate"} <= set(found.by_kind())
    assert "changed" in str(next(v for v in found.violations if v.kind == "lost-write"))


def test_a_committed_transaction_record_lost() -> None:
    h, rb = clean()
    rb["txn:0"].records.clear()
    assert kinds(h, rb).get("lost-write") == 1


def test_a_gap_in_a_partition_without_transactions() -> None:
    h, rb = clean()
    rb["log:0"] = PartitionRead(3, {0: "idem.0.0", 2: "plain.0.0"})
    found = kinds(h, rb)
    assert found.get("gap") == 1
    # The transactional topic's holes (markers, aborted records) are not gaps.
    assert "gap" not in kinds(*clean())


def test_duplicates_are_violations_from_idempotent_producers_and_counted_from_plain_ones() -> None:
    h, rb = clean()
    rb["log:0"] = PartitionRead(3, {0: "idem.0.0", 1: "plain.0.0", 2: "plain.0.0"})
    for op in h.ops:  # the consumers read to the new ends
        if op.f == "position" and op.offsets is not None:
            op.offsets = {k: v + 1 for k, v in op.offsets.items()}
    verdict = check(h.ops, rb)
    assert verdict.ok and verdict.counts["plain duplicates"] == 1
    rb["log:1"] = PartitionRead(2, {0: "idem.0.1", 1: "idem.0.1"})
    assert kinds(h, rb) == {"duplicate": 1}
    (dup,) = [v for v in check(h.ops, rb).violations if v.kind == "duplicate"]
    assert dup.places == [("log:1", 0), ("log:1", 1)]  # where the runner looks up each copy's batch


def test_a_phantom_value() -> None:
    h, rb = clean()
    h.add("c2", "ok", "poll", group="g", records=[(T, 1, 1, "nobody.0.0")], at=h.ops[-2].time - 0.01)
    h.ops.sort(key=lambda op: op.time)
    assert kinds(h, rb) == {"phantom": 1}
    h, rb = clean()
    rb["log:1"] = PartitionRead(2, {0: "idem.0.1", 1: "nobody.0.0"})
    assert kinds(h, rb).get("phantom") == 1


def test_an_aborted_transaction_read_back_or_consumed() -> None:
    h, rb = clean()
    rb["txn:0"].records[2] = "tx.0.2.0"
    assert kinds(h, rb).get("aborted-read") == 1
    h, rb = clean()
    h.add("c1", "ok", "poll", group="g", records=[(X, 0, 2, "tx.0.2.0")], at=h.ops[-2].time - 0.01)
    h.ops.sort(key=lambda op: op.time)
    assert kinds(h, rb).get("aborted-read") == 1


def test_a_record_of_an_open_transaction_consumed() -> None:
    h, rb = clean()
    invoke = next(op for op in h.ops if op.f == "txn" and op.type == "invoke" and op.txn == 1)
    read = next(op for op in h.ops if op.f == "poll" and op.process == "c1")
    read.time = invoke.time - 0.05  # read before the producer asked to commit
    assert kinds(h, rb) == {"uncommitted-read": 1}


def test_a_transaction_of_unknown_outcome_read_back_in_part() -> None:
    h, rb = clean()
    h.send("tx", 0, 3, "tx.0.3.0", topic=X, txn=3)
    h.send("tx", 0, 4, "tx.0.3.1", topic=X, txn=3)
    h.add("tx", "invoke", "txn", txn=3, value="commit")
    h.add("tx", "info", "txn", txn=3, value="commit", error="_TIMED_OUT")
    rb["txn:0"].records[3] = "tx.0.3.0"
    assert kinds(h, rb).get("txn-partial") == 1
    rb["txn:0"].records[4] = "tx.0.3.1"
    assert "txn-partial" not in kinds(h, rb)


def test_a_consumer_read_of_a_value_the_log_does_not_hold_there() -> None:
    h, rb = clean()
    h.add("c2", "ok", "poll", group="g", records=[(T, 1, 0, "idem.0.0")], at=h.ops[-2].time - 0.01)
    h.ops.sort(key=lambda op: op.time)
    assert kinds(h, rb) == {"inconsistent-read": 1}


def test_committed_offsets_going_backwards() -> None:
    h, rb = clean()
    h.add("obs", "invoke", "fetch-offsets", group="g", at=h.ops[-2].time - 0.02)
    h.add("obs", "ok", "fetch-offsets", group="g", offsets={"log:0": 1}, at=h.ops[-1].time + 0.005)
    h.ops.sort(key=lambda op: op.time)
    found = check(h.ops, rb)
    assert found.by_kind() == {"commit-backwards": 1}, report(h.ops, found, 0)


def test_overlapping_observations_may_be_seen_in_either_order() -> None:
    h, rb = clean()
    commit_invoke = next(op for op in h.ops if op.f == "commit" and op.type == "invoke" and op.process == "c1")
    # An OffsetFetch that began before the commit was answered may still see the old offset.
    h.add("obs2", "invoke", "fetch-offsets", group="g", at=commit_invoke.time - 0.001)
    h.add("obs2", "ok", "fetch-offsets", group="g", offsets={"log:0": 0}, at=commit_invoke.time + 0.2)
    h.ops.sort(key=lambda op: op.time)
    for i, op in enumerate(h.ops):
        op.index = i
    assert check(h.ops, rb).ok


def test_a_consumer_stuck_below_the_end() -> None:
    h, rb = clean()
    h.ops = [op for op in h.ops if not (op.f == "position" and op.process == "c2")]
    assert kinds(h, rb) == {"stuck-consumer": 1}
    h, rb = clean()
    rb["log:1"] = PartitionRead(2, {0: "idem.0.1", 1: "idem.0.2"})
    h.send("idem", 1, 1, "idem.0.2")
    h.ops.sort(key=lambda op: op.time)
    assert kinds(h, rb) == {"stuck-consumer": 1}


def test_a_partition_held_by_nobody_at_the_end() -> None:
    h, rb = clean()
    h.add("c2", "ok", "revoke", group="g", generation=2, assignment=[(T, 1)], at=h.ops[-2].time - 0.01)
    h.ops.sort(key=lambda op: op.time)
    assert kinds(h, rb) == {"stuck-consumer": 1}


def test_one_partition_held_by_two_members_of_one_generation() -> None:
    h, rb = clean()
    h.add("c2", "ok", "assign", group="g", generation=1, assignment=[(T, 0)], at=1.05)
    h.add("c2", "ok", "revoke", group="g", generation=1, assignment=[(T, 0)], at=1.06)
    h.ops.sort(key=lambda op: op.time)
    for i, op in enumerate(h.ops):
        op.index = i
    verdict = check(h.ops, rb)
    assert verdict.by_kind() == {"assignment-overlap": 1}
    assert "generation 1" in str(verdict.violations[0])


def test_a_zombie_of_an_older_generation_is_no_overlap() -> None:
    h, rb = clean()
    # c3 still holds log:1 at generation 1 while c2 holds it at generation 2: the protocol permits it.
    revoked = next(op for op in h.ops if op.f == "revoke" and op.process == "c1")
    h.add("c3", "ok", "assign", group="g", generation=1, assignment=[(T, 1)], at=revoked.time + 0.001)
    h.add("c3", "ok", "revoke", group="g", generation=1, assignment=[(T, 1)], at=revoked.time + 0.5)
    h.ops.sort(key=lambda op: op.time)
    for i, op in enumerate(h.ops):
        op.index = i
    assert check(h.ops, rb).ok


def test_failover_times_from_a_node_fault_to_the_next_write_and_read() -> None:
    h, rb = clean()
    fault = h.add("nemesis", "info", "fault", value="kill", target="node-2", leaders={"log:1": 2})
    h.send("idem", 1, 1, "idem.0.9")
    h.add("c2", "ok", "poll", group="g", records=[(T, 1, 1, "idem.0.9")])
    verdict = check(h.ops, rb)
    assert verdict.failover_write["kill"] == [pytest.approx(h.ops[-2].time - fault.time)]
    assert verdict.failover_read["kill"] == [pytest.approx(h.ops[-1].time - fault.time)]


def test_the_report_shows_the_seed_and_the_history_around_a_violation(tmp_path: Path) -> None:
    h, rb = clean()
    rb["log:1"] = PartitionRead(0, {})
    verdict = check(h.ops, rb)
    text = report(h.ops, verdict, 42)
    assert "VIOLATION (seed 42) lost-write" in text and "idem.0.1" in text
    assert any(op.value == "idem.0.1" for op in window(h.ops, verdict.violations[0]))
    # Histories and read-backs round-trip through their files.
    History.of(h.ops).dump(tmp_path / "h.jsonl")
    dump_readback(rb, tmp_path / "rb.json")
    again = check(History.load(tmp_path / "h.jsonl").snapshot(), load_readback(tmp_path / "rb.json"))
    assert again.by_kind() == verdict.by_kind()


def test_the_schedule_is_a_function_of_the_seed() -> None:
    a = schedule(7, 120, 3, netns=True)
    assert a == schedule(7, 120, 3, netns=True) and a != schedule(8, 120, 3, netns=True)
    assert all(f.at + f.duration <= 120 for f in a)
    assert {f.kind for f in schedule(7, 600, 3, netns=False)} <= {"pause", "kill", "etcd"}
    clocks = [f for f in schedule(7, 1800, 3, netns=False, clock=True) if f.kind == "clock"]
    assert clocks and all(abs(f.skew) in SKEWS for f in clocks)
    assert {f.skew > 0 for f in clocks} == {True, False}  # stepped ahead and back
    for target in {f.target for f in a}:  # one fault at a time per target
        mine = sorted((f for f in a if f.target == target), key=lambda f: f.at)
        assert all(x.at + x.duration <= y.at for x, y in itertools.pairwise(mine))


def test_a_client_that_died_is_a_violation_with_its_exception() -> None:
    h, rb = clean()
    h.add("txn-1", "info", "crash", error="AttributeError('boom')")
    (crash,) = [v for v in check(h.ops, rb).violations if v.kind == "client-crash"]
    assert crash.message == "txn-1 died: AttributeError('boom')"
