"""How many client connections the broker holds: Kafka's ``max.connections``,
``max.connections.per.ip`` and ``max.connections.per.ip.overrides``, and a reserve of descriptors
that client connections may not take from the logs.

As Kafka's acceptor does, a broker holding its maximum accepts nothing more: new connections wait in
the listen backlog until one closes. A connection from an address already holding its maximum is
accepted and closed at once (Kafka's TooManyConnectionsException), which the client sees as a
disconnection and retries after its backoff.

The reserve is kcoord's own: every client connection holds a descriptor, and so does every open
segment, index and sync of the logs. Kafka's default of ``max.connections`` is unlimited, and a
broker whose connections took the last descriptor under its open-files limit could no longer open or
sync a segment: an acknowledged write could then fail. So connections stop being accepted while
fewer than ``reserve_for(limit)`` descriptors would be left for the rest, whatever
``max.connections`` says.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

import trio

# Kafka's defaults of max.connections and max.connections.per.ip: Int.MaxValue, no limit.
UNLIMITED = 2**31 - 1
# Descriptors the logs may need beyond the connections: three per open partition (segment, offset
# and time index; an idle broker with its 50 offsets partitions holds ~170 in all), readers of older
# segments, the sync threads' own, compaction's files, the HTTP endpoints and etcd.
_MIN_RESERVE = 1024
_RESERVE_FRACTION = 10


def reserve_for(open_files_limit: int) -> int:
    """Descriptors kept from client connections under ``open_files_limit``: a tenth of it, and at
    least 1,024 (half the limit when it is below 2,048)."""
    return min(max(_MIN_RESERVE, open_files_limit // _RESERVE_FRACTION), open_files_limit // 2)


class LimitsError(ValueError):
    """A value of the connection limits that Kafka would refuse at startup."""


# What Java's Integer.parseInt takes (Python's int() also takes spaces and underscores).
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: comma-separated ``host:count``, each host an IP address or
    a name resolved once, now (as Kafka resolves them when the config is read); an empty host is the
    loopback address, as Java's ``InetAddress.getByName("")``. Keys are addresses. Refused with
    Kafka's messages, which are those of the Java exceptions its parsing raises."""
    overrides: dict[str, int] = {}
    if not text:
        return overrides
    for entry in re.split(r"\s*,\s*", text):
        colon = entry.rfind(":")
        if colon < 0:
            raise LimitsError(f"Error parsing configuration property 'max.connections.per.ip.overrides': "
                              f"begin 0, end -1, length {len(entry)}")
        host, count = entry[:colon].strip().strip("[]"), entry[colon + 1:].strip()
        if not _JAVA_INT.fullmatch(count) or not -(2**31) <= int(count) < 2**31:
            raise LimitsError(f'For input string: "{count}"')
        overrides[_address(host or "127.0.0.1", entry)] = int(count)
    return overrides


def address_key(host: str) -> str:
    """A peer's address as the limits name it: an IPv4 client of a dual-stack listener
    (``::ffff:10.0.0.1``) is its IPv4 address, as Java shows it."""
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    return host


def _address(host: str, entry: str) -> str:
    try:
        return address_key(str(ipaddress.ip_address(host)))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError:
        raise LimitsError(f"max.connections.per.ip.overrides: cannot resolve the host of {entry!r}") from None


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = UNLIMITED
    per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_values(cls, max_connections: int, per_ip: int, overrides: str) -> ConnectionLimits:
        """Checked as Kafka checks them: a per-address maximum of 0 only with overrides."""
        parsed = parse_overrides(overrides)
        if per_ip == 0 and not parsed:
            raise LimitsError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                              "property is set.")
        return cls(max_connections, per_ip, parsed)

    def for_address(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.per_ip)


class ConnectionCounter:
    """The client connections the broker holds, in all and per address; owned by the accept loops
    (one event loop, no lock)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        # Connections stop being accepted at this many, whatever max.connections says (set once
        # the broker knows its open-files limit: ``keep_descriptors``).
        self.descriptor_cap = UNLIMITED
        self.total = 0
        self.by_address: dict[str, int] = {}
        self._slot_freed: trio.Event | None = None

    def keep_descriptors(self, open_files_limit: int) -> None:
        """Under this open-files limit, connections leave ``reserve_for(open_files_limit)`` free."""
        self.descriptor_cap = max(open_files_limit - reserve_for(open_files_limit), 1)
        self._wake()

    @property
    def cap(self) -> int:
        """The most connections held at once: max.connections, or the descriptors' cap if lower."""
        return min(self.limits.max_connections, self.descriptor_cap)

    def full(self) -> bool:
        return self.total >= self.cap

    async def wait_for_slot(self) -> None:
        """Returns once a connection may be accepted (at once if one may now)."""
        while self.full():
            if self._slot_freed is None:
                self._slot_freed = trio.Event()
            await self._slot_freed.wait()

    def admit(self, address: str) -> bool:
        """Counts a connection just accepted from ``address``; False (not counted) when that
        address already holds its maximum."""
        held = self.by_address.get(address, 0)
        if held >= self.limits.for_address(address):
            return False
        self.by_address[address] = held + 1
        self.total += 1
        return True

    def release(self, address: str) -> None:
        held = self.by_address.get(address, 0) - 1
        if held > 0:
            self.by_address[address] = held
        else:
            self.by_address.pop(address, None)
        self.total -= 1
        self._wake()

    def update(self, limits: ConnectionLimits) -> None:
        """New limits (a dynamic config change): connections held above them stay; a raised
        maximum lets the waiting accepts go on."""
        self.limits = limits
        self._wake()

    def _wake(self) -> None:
        if self._slot_freed is not None and not self.full():
            self._slot_freed.set()
            self._slot_freed = None


class EveryInterval:
    """Whether an event of a key is logged now: at most once per ``interval`` seconds per key, the
    line saying how many happened since the last one. Remembers at most ``most_keys`` keys (beyond
    that, those logged longer ago than the interval are forgotten, then all): some lines more under
    a flood from that many addresses, never unbounded memory."""

    def __init__(self, interval: float, most_keys: int) -> None:
        self.interval = interval
        self.most_keys = most_keys
        # key -> (when it was last logged, events since then not logged)
        self.last: dict[str, tuple[float, int]] = {}

    def due(self, key: str, now: float) -> int:
        """0 when this event is not to be logged; else how many it stands for (itself included)."""
        logged = self.last.get(key)
        if logged is not None and now < logged[0] + self.interval:
            self.last[key] = (logged[0], logged[1] + 1)
            return 0
        if logged is None and len(self.last) >= self.most_keys:
            self.last = {k: v for k, v in self.last.items() if now < v[0] + self.interval}
            if len(self.last) >= self.most_keys:
                self.last.clear()
        self.last[key] = (now, 0)
        return 1 if logged is None else logged[1] + 1
