"""OffsetForLeaderEpoch's lookup, Kafka's LeaderEpochFileCache.endOffsetFor rules over a
partition's leader-epoch entries, with the log start applied as Kafka's truncateFromStart does."""

from __future__ import annotations

from broker.handlers.records import epoch_end_offset

ENTRIES = [(2, 0), (5, 40), (9, 100)]


def test_the_latest_epoch_ends_at_the_end() -> None:
    assert epoch_end_offset(ENTRIES, 9, 0, 130) == (9, 130)


def test_an_older_epoch_ends_where_the_next_one_starts() -> None:
    assert epoch_end_offset(ENTRIES, 2, 0, 130) == (2, 40)
    assert epoch_end_offset(ENTRIES, 5, 0, 130) == (5, 100)
    # An epoch between two known ones: the largest known epoch below it.
    assert epoch_end_offset(ENTRIES, 7, 0, 130) == (5, 100)


def test_undefined_and_unknown_epochs() -> None:
    assert epoch_end_offset(ENTRIES, -1, 0, 130) == (-1, -1)
    assert epoch_end_offset(ENTRIES, 12, 0, 130) == (-1, -1)  # newer than any
    assert epoch_end_offset([], 0, 0, 0) == (-1, -1)
    # Older than any: its own number, ending where the first known epoch starts.
    assert epoch_end_offset(ENTRIES, 1, 0, 130) == (1, 0)


def test_the_log_start_truncates_the_entries_from_the_start() -> None:
    # Records below 60 deleted: epoch 5 now starts at 60 and epoch 2 is gone.
    assert epoch_end_offset(ENTRIES, 2, 60, 130) == (2, 60)
    assert epoch_end_offset(ENTRIES, 5, 60, 130) == (5, 100)
    assert epoch_end_offset(ENTRIES, 9, 120, 130) == (9, 130)
    assert epoch_end_offset(ENTRIES, 5, 120, 130) == (5, 120)
