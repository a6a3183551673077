"""The analysis side of the rebalance journal, without Spark: events read back from a real journal
log in a data dir become `rebalances` and `doctor` rows and the report's stall section."""

from __future__ import annotations

from pathlib import Path

from analytics.journal import doctor_rows, read_events, rebalance_rows
from analytics.journal_report import journal_sections
from protocol.group_events import EVENTS_TOPIC, encode_event
from storage.config import LogConfig
from storage.partition_log import PartitionLog
from tests.unit.coordinators.group.core.harness import Harness


def test_a_journal_in_a_data_dir_becomes_rows_and_a_report_section(tmp_path: Path) -> None:
    h = Harness()
    for i in range(3):  # one client joining and leaving over and over
        (m,), _ = h.stable(group="flaky", client_id="worker")
        h.leave("flaky", [(m, None)])
        h.sleep(1000 + i)
    log, _ = PartitionLog.open(tmp_path / f"{EVENTS_TOPIC}-0", LogConfig())
    log.append([encode_event(e) for e in h.events])
    log.close()
    events = read_events(str(tmp_path))
    assert len(events) == len(h.events) and {e["group"] for e in events} == {"flaky"}
    rows = rebalance_rows(events)
    assert [r["cause"] for r in rows] == ["new-member-joined", "member-left"] * 3
    assert all(r["stall_ms"] is not None and r["started_ms"] <= r["ended_ms"] for r in rows)
    findings = doctor_rows(events)
    assert "member-churn" in {f["rule"] for f in findings}
    html = "".join(journal_sections(rows, findings))
    assert "id='stalls'" in html and "group.instance.id" in html


def test_a_data_dir_without_a_journal_has_no_events(tmp_path: Path) -> None:
    assert read_events(str(tmp_path)) == []


def test_every_partition_of_a_clusters_journal_is_read(tmp_path: Path) -> None:
    """A cluster keeps one journal partition per __consumer_offsets partition: each group's events
    lie in its own, and the analysis reads them all, oldest first."""
    written = []
    for partition, group in ((0, "zero"), (7, "seven"), (12, "twelve")):
        h = Harness()
        h.sleep(partition * 10)
        h.stable(group=group)
        log, _ = PartitionLog.open(tmp_path / f"{EVENTS_TOPIC}-{partition}", LogConfig())
        log.append([encode_event(e) for e in h.events])
        log.close()
        written += h.events
    # A partition directory being deleted is not part of the journal.
    log, _ = PartitionLog.open(tmp_path / f"{EVENTS_TOPIC}-3.abc-delete", LogConfig())
    log.append([encode_event(e) for e in written])
    log.close()
    events = read_events(str(tmp_path))
    assert sorted(e["group"] for e in events) == sorted(e.group for e in written)
    assert {r["group"] for r in rebalance_rows(events)} == {"zero", "seven", "twelve"}
    assert [e["timestamp"] for e in events] == sorted(e["timestamp"] for e in events)
