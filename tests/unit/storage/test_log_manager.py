"""Many partition logs under one log dir: create, list, reopen with checkpoints, delete topics."""

from __future__ import annotations

import os
from pathlib import Path

from storage.checkpoints import read_offset_checkpoint, read_partition_metadata
from storage.config import LogConfig
from storage.log_manager import LogManager

CFG = LogConfig(segment_bytes=2000)


def test_create_list_reopen(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, CFG)
    a = mgr.get_or_create("__consumer_offsets", 3, LogConfig.offsets_topic(), topic_id=b"\x01" * 16)
    b = mgr.get_or_create("my-topic", 0)
    assert mgr.get_or_create("my-topic", 0) is b
    for i in range(100):
        a.append([(b"k%d" % i, b"v" * 30, i)])
    b.append([(None, b"x", 1)])
    assert mgr.existing_partitions() == [("__consumer_offsets", 3), ("my-topic", 0)]
    assert read_partition_metadata(tmp_path / "__consumer_offsets-3") == b"\x01" * 16
    (tmp_path / "stray-file").write_text("not a partition")
    (tmp_path / "other-topic-1.0123abcd-delete").mkdir()
    mgr.close()
    points = read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert points == {("__consumer_offsets", 3): 100, ("my-topic", 0): 1}

    again = LogManager(tmp_path, CFG)
    assert not (tmp_path / "other-topic-1.0123abcd-delete").exists()
    reports = again.open_all(lambda t: LogConfig.offsets_topic() if t.startswith("__") else CFG)
    assert all(r.clean for r in reports.values())
    offsets_log = again.get("__consumer_offsets", 3)
    assert offsets_log is not None and offsets_log.end_offset == 100
    assert offsets_log.config.compact
    # with the recovery point at the end only the active segment is read back
    assert reports[("__consumer_offsets", 3)].scanned_segments == 1
    again.close()


def test_delete_topic_renames_then_removes(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, CFG)
    for p in range(3):
        mgr.get_or_create("doomed", p).append([(b"k", b"v", 1)])
    mgr.get_or_create("doomed-not", 0).append([(b"k", b"v", 1)])
    assert mgr.delete_topic("doomed") == [0, 1, 2]
    assert os.listdir(tmp_path) and sorted(n for n in os.listdir(tmp_path) if "doomed" in n) == ["doomed-not-0"]
    assert mgr.get("doomed", 0) is None and mgr.get("doomed-not", 0) is not None
    assert ("doomed", 1) not in read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    mgr.close()


def test_log_config_speaks_kafka_names() -> None:
    cfg = LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": "104857600",
                                "min.cleanable.dirty.ratio": "0.25", "retention.ms": None})
    assert cfg.compact and not cfg.delete and cfg.segment_bytes == 104857600
    assert cfg.min_cleanable_dirty_ratio == 0.25 and cfg.retention_ms == 604800000
    kafka = LogConfig.offsets_topic().to_kafka()
    assert kafka["cleanup.policy"] == "compact" and kafka["segment.bytes"] == "104857600"
    assert kafka["segment.index.bytes"] == "10485760" and kafka["delete.retention.ms"] == "86400000"
