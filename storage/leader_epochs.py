"""The leader-epoch cache of a partition: at which offset each leader epoch began, persisted in
``leader-epoch-checkpoint`` as Kafka does. An entry is added when the first batch of a new
epoch is appended, and entries past the log end are dropped when recovery truncates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storage.checkpoints import read_leader_epochs, write_leader_epochs


def _unfenced() -> None:
    pass


class LeaderEpochCache:
    def __init__(self, directory: Path, entries: list[tuple[int, int]], check: Callable[[], None] = _unfenced) -> None:
        self.directory = directory
        self.entries = entries
        # Raises FencedError unless this process may still change the partition's files.
        self.check = check

    @classmethod
    def load(cls, directory: Path, check: Callable[[], None] = _unfenced) -> LeaderEpochCache:
        return cls(directory, read_leader_epochs(directory), check)

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that ``epoch`` starts at ``start_offset`` (no-op for a known or older epoch)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.check()
        self.entries.append((epoch, start_offset))
        write_leader_epochs(self.directory, self.entries)

    def rebuild(self, scanned_from: int | None, scanned: list[tuple[int, int]]) -> None:
        """Make the entries say what the batches say: ``scanned`` are the epochs the batches from
        ``scanned_from`` on carry (as recovery read them); entries for the log before that are
        kept from the checkpoint. A checkpoint that lost or never got an entry (a write cut short,
        an earlier owner's late rewrite) is corrected, as Kafka's recovery assigns epochs from
        the batches it reads. An epoch under which no batch was written leaves no entry (one begun
        at the log end would be cut by ``truncate_from_end`` anyway)."""
        if scanned_from is None:
            return
        entries = [(e, o) for e, o in self.entries if o < scanned_from]
        for epoch, offset in scanned:
            if not entries or epoch > entries[-1][0]:
                entries.append((epoch, offset))
        if entries != self.entries:
            self.check()
            self.entries = entries
            write_leader_epochs(self.directory, entries)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was cut there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.check()
            self.entries = kept
            write_leader_epochs(self.directory, kept)

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the offset where the next epoch starts or the log end):
        the answer to OffsetForLeaderEpoch; (-1, -1) when ``epoch`` precedes every entry."""
        for i in range(len(self.entries) - 1, -1, -1):
            e, _start = self.entries[i]
            if e <= epoch:
                nxt = self.entries[i + 1][1] if i + 1 < len(self.entries) else log_end
                return e, nxt
        return -1, -1
