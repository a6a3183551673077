"""A listener of the node as the console shows it: kept apart from the pages so that the console's
socket can be opened at startup without loading what renders them (the pages, the state reader
and the client tools it reads through)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    address: str
