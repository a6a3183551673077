"""What the storage layer refuses."""

from __future__ import annotations


class StorageError(Exception):
    """Base for storage failures that callers map to Kafka error codes."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start or above the log end (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start}, {log_end}]")
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


class LogClosedError(StorageError):
    """The log was closed (its topic deleted or the broker stopping)."""


class FencedError(StorageError):
    """This process may no longer change the partition's files: another node owns it now, or may
    (its cluster lease could have expired). Raised before a change, nothing was changed; raised for a
    write found fenced once flushed (the log runtime's last check), the write may be in the files."""
