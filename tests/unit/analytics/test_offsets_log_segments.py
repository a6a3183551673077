"""Finding segment files in a data dir and reading past damage in them."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.decoder import decode_segment
from analytics.segments import NoSegments, SegmentHealth, iter_batches, list_segments
from tests.unit.analytics import kafka_bytes as kb

T0 = 1_700_000_000_000


def commits(base: int, n: int, group: str = "g") -> bytes:
    return kb.batch(base, [(kb.commit_key(group, "t", i), kb.commit_value_v3(base + i, -1, "", T0), T0)
                           for i in range(n)])


def offsets_of(data: bytes, health: SegmentHealth) -> list[int]:
    return [o for chunk in decode_segment(data, health) for o in chunk.commits.log_offset]


def test_a_data_dir_lists_only_offsets_topic_segments(tmp_path: Path) -> None:
    for name in ("__consumer_offsets-0", "__consumer_offsets-12", "orders-0",
                 "__consumer_offsets-3.0a1b2c-delete"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "00000000000000000000.log").write_bytes(commits(0, 1))
    part = tmp_path / "__consumer_offsets-12"
    (part / "00000000000000000100.log").write_bytes(commits(100, 1))
    for extra in ("00000000000000000000.index", "00000000000000000000.timeindex", "leader-epoch-checkpoint",
                  "00000000000000000200.log.cleaned", "00000000000000000300.log.deleted"):
        (part / extra).write_bytes(b"x")
    (tmp_path / "meta.properties").write_text("node.id=1\n")

    found = list_segments(str(tmp_path))
    assert [(s.log_partition, s.base_offset) for s in found] == [(0, 0), (12, 0), (12, 100)]
    assert found[2].path.endswith("__consumer_offsets-12/00000000000000000100.log")
    assert [s.log_partition for s in list_segments(f"file://{part}")] == [12, 12]
    assert [s.base_offset for s in list_segments(str(part / "00000000000000000100.log"))] == [100]


def test_a_copied_partition_dir_under_another_name_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(commits(0, 1))
    assert [s.log_partition for s in list_segments(str(tmp_path))] == [-1]


def test_an_empty_dir_says_so(tmp_path: Path) -> None:
    with pytest.raises(NoSegments, match="no __consumer_offsets segment files"):
        list_segments(str(tmp_path))
    with pytest.raises(NoSegments, match="no such file"):
        list_segments(str(tmp_path / "missing"))


def test_a_uri_no_file_system_opens_says_so() -> None:
    pytest.importorskip("pyarrow")
    with pytest.raises(NoSegments, match="cannot list it"):
        list_segments("nosuchscheme://bucket/kafka")


def test_a_truncated_segment_yields_its_whole_batches() -> None:
    data = commits(0, 2) + commits(2, 2)
    health = SegmentHealth()
    assert offsets_of(data[:-5], health) == [0, 1]
    assert len(health.problems) == 1
    assert health.problems[0].startswith("truncated:") and "offset 2" in health.problems[0]


def test_a_batch_with_a_bad_crc_is_skipped_and_the_rest_read() -> None:
    first, second, third = commits(0, 1), bytearray(commits(1, 1)), commits(2, 1)
    second[-1] ^= 0xFF
    health = SegmentHealth()
    assert offsets_of(first + bytes(second) + third, health) == [0, 2]
    assert health.problems == [f"CRC mismatch in the batch at position {len(first)}, offset 1: batch skipped"]


def test_bytes_that_are_not_a_log() -> None:
    health = SegmentHealth()
    assert offsets_of(b"this is a text file, not a Kafka log segment\n" * 4, health) == []
    assert health.problems and "not a record batch at position 0" in health.problems[0]


def test_a_zero_filled_tail_ends_the_data_quietly() -> None:
    health = SegmentHealth()
    assert offsets_of(commits(0, 3) + bytes(8192), health) == [0, 1, 2]
    assert health.problems == []


def test_an_empty_file_has_no_batches() -> None:
    health = SegmentHealth()
    assert list(iter_batches(b"", health)) == []
    assert health.problems == []
