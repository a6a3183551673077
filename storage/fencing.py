"""The right to change a partition's files, checked where they change.

Several nodes of a cluster share one data directory; each partition has one owner at a time, and
only its owner may create, append to, truncate, rename or delete the partition's segment, index,
checkpoint and snapshot files. A ``Fence`` is that right for one tenure (one claim of a partition):
the log holds it and checks it under its lock right before every change of a file, and it turns
false for good when the tenure ends (``revoke``: the node learned or suspects it lost the
partition) or, without anyone telling it, as soon as the lease behind it could have expired
(``valid``: a deadline read on a clock that counts time the host or process was suspended).

A check is a flag and a clock read (~100 ns): cheap enough to repeat before every write, roll,
flush, rename and unlink. A new claim gets a new fence, so whatever an earlier tenure left open
(a log object, a queued write, a thread mid-append) stays fenced.
"""

from __future__ import annotations

from collections.abc import Callable

from storage.errors import FencedError


def _always() -> bool:
    return True


class Fence:
    __slots__ = ("name", "epoch", "revoked", "valid")

    def __init__(self, name: str, epoch: int = 0, valid: Callable[[], bool] = _always) -> None:
        self.name = name
        self.epoch = epoch
        self.revoked = False
        self.valid = valid

    def revoke(self) -> None:
        """The tenure is over: nothing more is changed under this fence, ever."""
        self.revoked = True

    @property
    def ok(self) -> bool:
        return not self.revoked and self.valid()

    def check(self) -> None:
        """Raises ``FencedError`` unless this process may still change the partition's files."""
        if self.revoked:
            raise FencedError(f"{self.name}: no longer owned here (epoch {self.epoch})")
        if not self.valid():
            raise FencedError(f"{self.name}: the cluster lease could have expired")

    def __repr__(self) -> str:
        state = "revoked" if self.revoked else "held"
        return f"Fence({self.name}, epoch={self.epoch}, {state})"


REVOKED = Fence("not owned")
REVOKED.revoke()
