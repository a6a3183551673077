"""A broker's ``sasl.jaas.config`` values as Kafka reads them (``JaasConfig``): one or more entries
``<login module class> <flag> key="value" ...;``, values quoted or bare words. kcoord reads from them
what Kafka's server side reads: PLAIN's users (``user_<name>="<password>"``) and the unsecured
OAUTHBEARER validator's options (``unsecuredValidator*``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<char>[=;]))')


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> list[JaasEntry]:
    """Raises ValueError with Kafka's words for what it cannot read."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"Unexpected character {text[pos]!r} in JAAS config")
        pos = match.end()
        if match["quoted"] is not None:
            tokens.append(("word", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1])))
        elif match["word"] is not None:
            tokens.append(("word", match["word"]))
        else:
            tokens.append(("char", match["char"]))
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":
            raise ValueError("Login module not specified in JAAS config")
        if i + 1 >= len(tokens):
            raise ValueError("Login module control flag not specified in JAAS config")
        flag = tokens[i + 1][1]
        if flag.lower() not in FLAGS:
            raise ValueError(f"Invalid login module control flag '{flag}' in JAAS config")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("char", ";"):
            key = tokens[i][1]
            if i + 2 >= len(tokens) or tokens[i + 1] != ("char", "=") or tokens[i + 2][0] != "word":
                raise ValueError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise ValueError("JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise ValueError("Login module not specified in JAAS config")
    return entries
