"""``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map`` as Kafka reads them.

A listener is ``NAME://host:port``; its name maps to one of the four security protocols through the
map (by default each protocol's own name maps to itself, so ``SASL_SSL://:9094`` needs no map). The
advertised address of a listener is the entry of the same name in ``advertised.listeners``, or the
listener itself (with a wildcard host replaced by loopback)."""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


class ListenerError(ValueError):
    """A listener entry that cannot be used (the message names the property and the entry)."""


@dataclass(frozen=True)
class ListenerSpec:
    name: str
    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: {entry!r} is not NAME:PROTOCOL with PROTOCOL one "
                                f"of {', '.join(PROTOCOLS)}")
        mapping[name] = protocol
    return mapping


def _split(prop: str, text: str) -> list[tuple[str, str, int]]:
    entries: list[tuple[str, str, int]] = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        # Not urlsplit: listener names such as SASL_SSL are not URL schemes (no underscore there).
        name, sep, address = raw.partition("://")
        if not sep:
            name, address = "PLAINTEXT", raw
        host, _, port_text = address.rpartition(":")
        host = host.strip("[]")
        if not port_text.isdigit() or int(port_text) > 65535:
            raise ListenerError(f"{prop}: {raw!r} has no valid port")
        entries.append((name.strip().upper(), host, int(port_text)))
    return entries


def parse_listeners(listeners: str, protocol_map: str) -> list[ListenerSpec]:
    mapping = parse_protocol_map(protocol_map)
    specs: list[ListenerSpec] = []
    for name, host, port in _split("listeners", listeners):
        protocol = mapping.get(name)
        if protocol is None:
            raise ListenerError(f"listeners: listener name {name!r} is not in listener.security.protocol.map")
        specs.append(ListenerSpec(name, protocol, host or "0.0.0.0", port))
    if not specs:
        raise ListenerError("listeners: no listener given")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ListenerError(f"listeners: each listener name may appear once, got {', '.join(names)}")
    ports = [s.port for s in specs if s.port != 0]
    if len(set(ports)) != len(ports):
        raise ListenerError("listeners: two listeners share a port")
    return specs


def parse_advertised(advertised: str, listeners: list[ListenerSpec]) -> dict[str, tuple[str, int]]:
    """Listener name -> (host, port) given to clients that connected through it."""
    given = {name: (host, port) for name, host, port in _split("advertised.listeners", advertised)}
    known = {s.name for s in listeners}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ListenerError(f"advertised.listeners: {', '.join(unknown)} is not a listener")
    out: dict[str, tuple[str, int]] = {}
    for spec in listeners:
        host, port = given.get(spec.name, (spec.host, spec.port))
        out[spec.name] = ("127.0.0.1" if host in _WILDCARD_HOSTS else host, port)
    return out
