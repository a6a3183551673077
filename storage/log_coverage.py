"""What a log held below an offset, recorded so that a file derived from those bytes (a cache
beside the log) can later tell whether they are still the same.

A coverage names the log start offset, every segment holding offsets below ``end_offset`` with
its file's inode and the bytes of it that lie below (the whole file but for the last), and the
position and CRC of the batch that ends at ``end_offset - 1``. Compaction swaps segments (new
files), retention removes them and recovery truncates them: each changes an inode, a base offset,
a size or that last batch, and the coverage no longer holds. A copy of the directory elsewhere
has new inodes too: the derived file is then not trusted, which costs time, never correctness. The storage layer knows nothing of what was derived; it only answers whether
the bytes still match.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEAD = struct.Struct(">qqqIi")  # log start, end offset, last batch position, last batch CRC, segments
_SEGMENT = struct.Struct(">qqQ")  # base offset, bytes covered, inode


class CoverageFormatError(ValueError):
    """Bytes that are not an encoded coverage."""


@dataclass(frozen=True, slots=True)
class LogCoverage:
    log_start_offset: int
    end_offset: int  # first offset not covered; the end of a batch
    segments: tuple[tuple[int, int, int], ...]  # (base offset, bytes covered, inode), oldest first
    last_batch_position: int  # in the last covered segment
    last_batch_crc: int

    def to_bytes(self) -> bytes:
        head = _HEAD.pack(self.log_start_offset, self.end_offset, self.last_batch_position, self.last_batch_crc,
                          len(self.segments))
        return head + b"".join(_SEGMENT.pack(*segment) for segment in self.segments)

    @classmethod
    def from_bytes(cls, data: bytes) -> LogCoverage:
        if len(data) < _HEAD.size:
            raise CoverageFormatError("shorter than its header")
        start, end, position, crc, count = _HEAD.unpack_from(data, 0)
        if count <= 0 or len(data) != _HEAD.size + count * _SEGMENT.size:
            raise CoverageFormatError(f"{len(data)} bytes for {count} segments")
        segments = tuple(_SEGMENT.unpack_from(data, _HEAD.size + i * _SEGMENT.size) for i in range(count))
        return cls(start, end, segments, position, crc)
