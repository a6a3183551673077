"""What a partition knows of transactions: which producers have a transaction open on it (and from
which offset), the last stable offset that follows, and the aborted transactions that
``read_committed`` consumers must skip (Kafka's ProducerStateManager ongoing transactions and its
``.txnindex``).

Pure bookkeeping, no I/O: the data plane notes each transactional batch when it is queued and each
marker once it is durable; a partition opened from disk rebuilds it with ``rebuild`` from the
batch headers and markers of its log.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from storage.txn_index import AbortedTxn


class PartitionTxns:
    __slots__ = ("ongoing", "aborted", "_aborted_last")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # in marker order (so sorted by last offset)
        self._aborted_last: list[int] = []

    def on_batch(self, producer_id: int, first_offset: int) -> None:
        """A transactional data batch of ``producer_id`` starting at ``first_offset``."""
        self.ongoing.setdefault(producer_id, first_offset)

    def on_marker(self, producer_id: int, marker_offset: int, commit: bool) -> AbortedTxn | None:
        """The producer's marker at ``marker_offset`` ends its transaction here (a marker for a
        producer with nothing open, as written again after a coordinator restart, changes nothing).
        Returns the transaction if the marker aborted it."""
        first = self.ongoing.get(producer_id)
        if first is None or first > marker_offset:
            return None
        del self.ongoing[producer_id]
        if commit:
            return None
        # The last stable offset right after the marker, as Kafka's index records it: the oldest
        # other transaction open before the marker, else the offset after the marker. (Batches
        # queued behind the marker are noted already but were not in the log yet.)
        older = [f for f in self.ongoing.values() if f < marker_offset]
        txn = AbortedTxn(producer_id, first, marker_offset, min(older, default=marker_offset + 1))
        self.aborted.append(txn)
        self._aborted_last.append(marker_offset)
        return txn

    def last_stable_offset(self, high_watermark: int) -> int:
        """Below it every transaction is decided: the first offset of the oldest open one, or the
        high watermark."""
        if not self.ongoing:
            return high_watermark
        return min(high_watermark, min(self.ongoing.values()))

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions that overlap [fetch_offset, upper_bound) (Kafka's collectAbortedTxns)."""
        i = bisect.bisect_left(self._aborted_last, fetch_offset)
        return [t for t in self.aborted[i:] if t.first_offset < upper_bound]

    def forget_before(self, log_start_offset: int) -> None:
        """Aborted transactions wholly below the log start are of no use to any fetch."""
        i = bisect.bisect_left(self._aborted_last, log_start_offset)
        if i:
            del self.aborted[:i]
            del self._aborted_last[:i]

    @classmethod
    def rebuild(cls, events: Iterable[tuple[int, int, bool, bool | None]]) -> PartitionTxns:
        """From ``(producer_id, offset, is_marker, committed)`` in log order: transactional batches
        (``is_marker`` False) and markers."""
        txns = cls()
        for producer_id, offset, is_marker, committed in events:
            if is_marker:
                txns.on_marker(producer_id, offset, bool(committed))
            else:
                txns.on_batch(producer_id, offset)
        return txns
