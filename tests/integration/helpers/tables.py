"""The tables `kcoord groups` prints, parsed."""

from __future__ import annotations

import re


def table(text: str) -> list[list[str]]:
    """Rows of a printed table, split on runs of spaces (no cell here holds a space)."""
    return [re.split(r" +", line.strip()) for line in text.splitlines() if line.strip()]


