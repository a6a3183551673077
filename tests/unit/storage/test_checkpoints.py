"""Kafka's checkpoint and metadata files, byte for byte."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from storage.checkpoints import (
    CheckpointError,
    read_leader_epochs,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_leader_epochs,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    write_leader_epochs(tmp_path, [(0, 0), (3, 1200)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 1200\n"
    assert read_leader_epochs(tmp_path) == [(0, 0), (3, 1200)]
    assert read_leader_epochs(tmp_path / "missing") == []


def test_partition_metadata_uses_kafka_uuid_text(tmp_path: Path) -> None:
    topic_id = uuid.UUID("b4a0bc4c-2d6f-4f5e-8a36-1f0e5c5a9f11").bytes
    text = topic_id_to_str(topic_id)
    assert len(text) == 22 and "=" not in text and topic_id_from_str(text) == topic_id
    write_partition_metadata(tmp_path, topic_id)
    assert (tmp_path / "partition.metadata").read_text() == f"version: 0\ntopic_id: {text}\n"
    assert read_partition_metadata(tmp_path) == topic_id
    # a file written by Kafka (its Uuid.toString of the same id)
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: tKC8TC1vT16KNh8OXFqfEQ\n")
    assert read_partition_metadata(tmp_path) == topic_id


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("__consumer_offsets", 7): 42, ("my-topic", 0): 0})
    assert path.read_text() == "0\n2\n__consumer_offsets 7 42\nmy-topic 0 0\n"
    assert read_offset_checkpoint(path) == {("__consumer_offsets", 7): 42, ("my-topic", 0): 0}
    assert not list(tmp_path.glob("*.tmp"))
    path.write_text("0\n3\n__consumer_offsets 7 42\n")
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(path)


def test_meta_properties_round_trip_and_kafka_file(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, {"node.id": "1", "version": "1", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"})
    text = (tmp_path / "meta.properties").read_text()
    assert text.startswith("#\n#") and "node.id=1\n" in text
    assert read_meta_properties(tmp_path) == {"node.id": "1", "version": "1", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Oct 24 10:00:00 UTC 2024\nnode.id=3\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\nversion=1\ncluster.id=abc\n"
    )
    assert read_meta_properties(tmp_path)["directory.id"] == "AAAAAAAAAAAAAAAAAAAAAA"
