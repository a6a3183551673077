"""For any history of writes and tombstones, any segment layout and any sequence of cleanings,
the latest value per key read from the compacted log equals the one from the original log,
and every surviving record is byte-for-byte the original record at its offset."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.record_batch import decode_records
from storage.cleaner import clean
from storage.config import LogConfig
from storage.partition_log import PartitionLog

CFG = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact", delete_retention_ms=100)

record = st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e", None]), st.none() | st.binary(max_size=12))
batch = st.lists(record, min_size=1, max_size=4)
step = st.one_of(
    st.tuples(st.just("append"), batch),
    st.tuples(st.just("roll"), st.none()),
    st.tuples(st.just("clean"), st.integers(0, 300)),  # how far the clock moves first
)


def records(log: PartitionLog) -> dict[int, tuple[bytes | None, bytes | None, int]]:
    out = {}
    for b in log.batches():
        for r in decode_records(b):
            out[b.base_offset + r.offset_delta] = (r.key, r.value, b.base_timestamp + r.timestamp_delta)
    return out


def latest(recs: dict[int, tuple[bytes | None, bytes | None, int]]) -> dict[bytes, bytes]:
    state: dict[bytes, bytes | None] = {}
    for offset in sorted(recs):
        key, value, _ = recs[offset]
        if key is not None:
            state[key] = value
    return {k: v for k, v in state.items() if v is not None}


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=40), st.sampled_from([0, 1]))
def test_compaction_preserves_latest_value_per_key(steps: list[tuple[str, object]], codec: int) -> None:
    clock = [1000]
    with tempfile.TemporaryDirectory() as d:
        log, _ = PartitionLog.open(d, CFG, clock=lambda: clock[0])
        original: dict[int, tuple[bytes | None, bytes | None, int]] = {}
        for kind, arg in steps:
            if kind == "append":
                entries = [(k, v, clock[0]) for k, v in arg]  # type: ignore[attr-defined]
                first, _ = log.append(entries, compression=codec)
                for i, e in enumerate(entries):
                    original[first + i] = e
                clock[0] += 1
            elif kind == "roll":
                log.roll()
            else:
                clock[0] += arg  # type: ignore[operator]
                clean(log, clock[0], force=True)
                now = records(log)
                assert latest(now) == latest(original)
                assert all(original[o] == r for o, r in now.items())
                # records of the active segment and null keys are never removed
                active = log.segments()[-1].base_offset
                assert all(o in now for o, (k, _, _) in original.items() if o >= active or k is None)
        end = log.end_offset
        log.close()
        reopened, report = PartitionLog.open(d, CFG)
        assert report.clean and reopened.end_offset == end
        assert latest(records(reopened)) == latest(original)
        reopened.close()
