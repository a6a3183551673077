"""How old a group's first unconsumed record is: the time of the first data record at or after an
offset, in the record batches a Fetch returns."""

from __future__ import annotations

from kclient.admin_client import first_record_time
from protocol.record_batch import build_simple_batch


def test_the_first_record_at_or_after_the_offset_gives_the_time() -> None:
    data = build_simple_batch([(None, b"a", 1000), (None, b"b", 2000), (None, b"c", 3000)], base_offset=10)
    assert first_record_time(data, 10) == 1000
    assert first_record_time(data, 11) == 2000
    assert first_record_time(data, 12) == 3000
    # Fetch returns whole batches: an offset before them (compacted away) reads the first one.
    assert first_record_time(data, 5) == 1000


def test_control_batches_and_batches_before_the_offset_are_skipped() -> None:
    marker = build_simple_batch([(b"\x00\x00\x00\x00", b"", 500)], base_offset=0, control=True, transactional=True)
    older = build_simple_batch([(None, b"x", 700)], base_offset=1)
    newer = build_simple_batch([(None, b"y", 900)], base_offset=2)
    assert first_record_time(marker + older + newer, 0) == 700
    assert first_record_time(marker + older + newer, 2) == 900


def test_no_record_yet_is_no_time() -> None:
    assert first_record_time(b"", 0) is None
    assert first_record_time(build_simple_batch([(None, b"a", 1000)], base_offset=0), 1) is None
