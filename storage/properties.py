"""Java ``.properties`` text, the one reader of it: the data dir's ``meta.properties`` and a
broker's ``.properties`` config file.

One ``name=value`` (or ``name: value``, the first of ``=`` and ``:`` separating) per line; blank
lines and lines starting with ``#`` or ``!`` are ignored; names and values are stripped. Kafka's
files use no line continuations or escapes, and neither does this reader.
"""

from __future__ import annotations


class PropertiesError(ValueError):
    """A line that is neither blank, a comment nor ``name=value``."""

    def __init__(self, lineno: int, line: str) -> None:
        self.lineno = lineno
        super().__init__(f"line {lineno}: expected name=value, got {line!r}")


def parse_properties(text: str) -> dict[str, str]:
    """``{name: value}`` of ``text``; a later line wins over an earlier one of the same name."""
    values: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise PropertiesError(lineno, line)
        values[line[:sep].strip()] = line[sep + 1 :].strip()
    return values
