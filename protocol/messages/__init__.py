"""The message tables of every API this broker speaks, indexed by API key.

Each module here declares one API's request and response (``message(..., api_key=...)``), or
records of an internal topic. This index is derived from them and from nothing else: ``REQUESTS``
and ``RESPONSES`` by API key, and ``ApiKey``, named as each request is without its ``Request``
suffix (``ApiKey.JoinGroup``). Its typed declaration (``__init__.pyi``) is generated with the
tables' by ``python -m protocol.codegen.typegen``.

Being here makes an API decodable (tools, tests), not served: the broker serves, and advertises in
ApiVersions, exactly the APIs of its table in ``broker/apis.py`` (``api_table``).
"""

from __future__ import annotations

import importlib
import pkgutil
from enum import IntEnum

from protocol.schema import Message


def _api_messages() -> list[Message]:
    """Every message with an API key that a module of this package declares under its own name."""
    found: list[Message] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [v for k, v in vars(module).items() if isinstance(v, Message) and v.api_key is not None and k == v.name]
    return found


def _by_key(suffix: str) -> dict[int, Message]:
    out: dict[int, Message] = {}
    for msg in _api_messages():
        if msg.name.endswith(suffix):
            assert msg.api_key is not None
            if msg.api_key in out:
                raise ValueError(f"API key {msg.api_key}: both {out[msg.api_key].name} and {msg.name}")
            out[msg.api_key] = msg
    return dict(sorted(out.items()))


REQUESTS: dict[int, Message] = _by_key("Request")
RESPONSES: dict[int, Message] = _by_key("Response")
if REQUESTS.keys() != RESPONSES.keys():
    raise ValueError(f"requests without responses or the reverse: {sorted(REQUESTS.keys() ^ RESPONSES.keys())}")

ApiKey = IntEnum("ApiKey", {m.name.removesuffix("Request"): key for key, m in REQUESTS.items()})
ApiKey.__doc__ = "Kafka's API keys, spelled as in the protocol guide (``ApiKey.JoinGroup``)."

__all__ = ["REQUESTS", "RESPONSES", "ApiKey"]
