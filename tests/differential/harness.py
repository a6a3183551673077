"""The differential harness: one scenario, driven by the same code against Apache Kafka and against
kcoord, its observable results normalized for what legitimately differs between two brokers and
compared field by field.

A scenario is a function of a :class:`Target` (one broker: a factory of raw protocol clients) that
returns what a client observed: responses (the codec's typed messages), lists, dicts, numbers.
:func:`compare` runs it against both brokers, normalizes both results with the same rules and
fails with the list of differing fields, each with its path and both values.

The normalizations (docs/differential.md lists them and why each is legitimate):

- ``throttle_time_ms`` is dropped: quotas are not part of the comparison.
- ``error_message`` is dropped: its text is free-form; the error code is compared.
- Member ids (``member_id``, ``leader``, ``member_ids``…) are renamed ``member-0``, ``member-1``… in
  the order they first appear in the result: both brokers make random ids.
- Node ids, hosts and ports (``node_id``, ``leader_id``, ``host``, ``port``, ``controller_id``…) are
  renamed in order of appearance; cluster ids become ``<cluster>``.
- Topic ids become ``topic-id-0``… in order of appearance (the zero id stays as it is).
- Producer ids become ``producer-0``… (-1 stays): each broker allocates its own.
- A list of members (elements with a ``member_id``) is sorted by the renamed ids: Kafka keeps a
  group's members in hash maps, so their order in JoinGroup and DescribeGroups answers carries no
  meaning. A scenario that returns its member ids first, in the order of their roles, names them
  alike on both brokers; one that returns a sequence of answers naming members (heartbeat answers)
  keys them by position in a dict, or the sequence would be compared as a set.
- A list of groups (elements with a ``group_id``: DescribeGroups, DeleteGroups, OffsetFetch v8)
  is sorted by group id: Kafka answers a request about several groups coordinator shard by
  coordinator shard, so its order follows the hash of the ids, not the request.
- Lists of partitions (elements with a ``partition_index``) are sorted by index, lists of topics
  (elements with a ``name`` and a list of partitions) by name: Kafka answers the partitions it refuses
  up front (unknown topics and partitions) before those its coordinator answered, whatever their
  order in the request; a client finds each by its key.
- Timestamps the broker takes from its clock (``log_append_time_ms`` when set, ``*_timestamp`` of
  described state) become ``<time>``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from kclient.wire_client import WireClient
from protocol.schema import Data

# What a scenario returns, once plain: nested dicts, lists and scalars.
Plain = object
T = TypeVar("T")

UNKNOWN_SERVER_ERROR = -1
NOT_COORDINATOR = 16
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15


@dataclass
class Target:
    """One broker under comparison: its name (``kafka`` or ``kcoord``) and where it listens."""

    name: str
    port: int
    host: str = "127.0.0.1"
    clients: list[WireClient] = field(default_factory=list)

    def client(self, client_id: str = "differential") -> WireClient:
        """A new connection, closed when the scenario ends."""
        c = WireClient(self.host, self.port, client_id=client_id, timeout=20.0)
        self.clients.append(c)
        return c

    @contextmanager
    def session(self) -> Iterator[Target]:
        try:
            yield self
        finally:
            for c in self.clients:
                c.close()
            self.clients.clear()


Scenario = Callable[[Target], object]

# Fields dropped from every result.
DROPPED = frozenset({"throttle_time_ms", "error_message"})
# Fields whose values are renamed in order of appearance, by the kind of value they hold.
RENAMED = {
    "member_id": "member", "leader": "member", "member_ids": "member", "members_ids": "member",
    "assignor_member_id": "member",
    "node_id": "node", "leader_id": "node", "controller_id": "node", "broker_id": "node",
    "coordinator_id": "node", "replica_nodes": "node", "isr_nodes": "node", "offline_replicas": "node",
    "replicas": "node", "isr": "node",
    "host": "host", "port": "port",
    "topic_id": "topic-id",
    "producer_id": "producer",
}
CLUSTER = "<cluster>"
TIME = "<time>"
TIMES = frozenset({"log_append_time_ms", "transaction_start_time_ms"})
ZERO_UUID = uuid.UUID(int=0)


class Normalizer:
    """Applies the rules to one result; the renaming maps live as long as the normalizer, so one
    normalizer per broker per scenario gives both the same names when they behave alike."""

    def __init__(self, dropped: frozenset[str] = DROPPED, renamed: Mapping[str, str] = RENAMED,
                 extra_dropped: frozenset[str] = frozenset()) -> None:
        self.dropped = dropped | extra_dropped
        self.renamed = dict(renamed)
        self.names: dict[str, dict[object, str]] = {}

    def rename(self, kind: str, value: object) -> object:
        if value in ("", None, -1, ZERO_UUID, bytes(16)):
            return value
        names = self.names.setdefault(kind, {})
        if value not in names:
            names[value] = f"{kind}-{len(names)}"
        return names[value]

    def __call__(self, value: object, key: str = "") -> Plain:
        if isinstance(value, Data):
            return {n: self(getattr(value, n), n) for n in type(value)._fields if n not in self.dropped}
        if isinstance(value, Mapping):
            return {k: self(v, k if isinstance(k, str) else key) for k, v in value.items()
                    if k not in self.dropped}
        if isinstance(value, (list, tuple)):
            items = [self(v, key) for v in value]
            if items and all(isinstance(i, dict) and "member_id" in i for i in items):
                # Groups keep members in hash maps: a list of members is a set.
                items.sort(key=lambda i: str(i["member_id"]))  # type: ignore[index]
            elif items and all(isinstance(i, dict) and "partition_index" in i for i in items):
                items.sort(key=lambda i: i["partition_index"])  # type: ignore[index]
            elif items and all(isinstance(i, dict) and "name" in i
                               and any(isinstance(v, list) for v in i.values()) for i in items):
                items.sort(key=lambda i: str(i["name"]))  # type: ignore[index]
            elif items and all(isinstance(i, dict) and "group_id" in i for i in items):
                # Kafka answers a request about several groups shard by shard, not in request order.
                items.sort(key=lambda i: str(i["group_id"]))  # type: ignore[index]
            return items
        if key in self.renamed:
            return self.rename(self.renamed[key], value)
        if key == "cluster_id" and value is not None:
            return CLUSTER
        if key in TIMES and isinstance(value, int) and value > 0:
            return TIME
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        return value


def differences(kafka: Plain, kcoord: Plain, path: str = "$") -> list[str]:
    """Each differing field: its path, what Kafka answered and what kcoord answered."""
    if isinstance(kafka, dict) and isinstance(kcoord, dict):
        out: list[str] = []
        for k in list(kafka) + [k for k in kcoord if k not in kafka]:
            if k not in kcoord:
                out.append(f"{path}.{k}: only Kafka has it ({kafka[k]!r})")
            elif k not in kafka:
                out.append(f"{path}.{k}: only kcoord has it ({kcoord[k]!r})")
            else:
                out += differences(kafka[k], kcoord[k], f"{path}.{k}")
        return out
    if isinstance(kafka, list) and isinstance(kcoord, list):
        out = []
        if len(kafka) != len(kcoord):
            out.append(f"{path}: Kafka has {len(kafka)} elements, kcoord {len(kcoord)}")
        for i, (a, b) in enumerate(zip(kafka, kcoord, strict=False)):
            out += differences(a, b, f"{path}[{i}]")
        return out
    if kafka != kcoord:
        return [f"{path}: Kafka {kafka!r}, kcoord {kcoord!r}"]
    return []


@dataclass
class Pair:
    """The two brokers of a comparison."""

    kafka: Target
    kcoord: Target

    def run(self, scenario: Scenario, extra_dropped: frozenset[str] = frozenset(), *,
            together: bool = False) -> tuple[Plain, Plain]:
        """The scenario on Kafka, then on kcoord; ``together``: on both at once, each on a thread of
        its own, for a scenario that spends its time waiting for a broker's interval (the two
        brokers share nothing, and a scenario keeps its state per call)."""

        def one(target: Target) -> Plain:
            with target.session():
                raw = scenario(target)
            return Normalizer(extra_dropped=extra_dropped)(raw)

        if not together:
            return one(self.kafka), one(self.kcoord)
        with ThreadPoolExecutor(2, thread_name_prefix="differential") as pool:
            kafka, kcoord = pool.submit(one, self.kafka), pool.submit(one, self.kcoord)
            return kafka.result(), kcoord.result()

    def compare(self, scenario: Scenario, extra_dropped: frozenset[str] = frozenset(), *,
                together: bool = False) -> Plain:
        """Runs the scenario on both, fails on any difference, returns Kafka's normalized result
        (for assertions that the scenario saw what it meant to provoke)."""
        kafka, kcoord = self.run(scenario, extra_dropped, together=together)
        diff = differences(kafka, kcoord)
        if diff:
            raise AssertionError("Kafka and kcoord differ:\n  " + "\n  ".join(diff)
                                 + f"\nKafka:  {kafka!r}\nkcoord: {kcoord!r}")
        return kafka


def unique(prefix: str) -> str:
    """A group, topic or transactional id no other test uses: the Kafka broker is shared."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def java_partition(key: str, partitions: int = 50) -> int:
    """The partition of __consumer_offsets (or __transaction_state) Kafka maps a key to."""
    h = 0
    for ch in key.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (h & 0x7FFFFFFF) % partitions


def keys_covering(prefix: str, partitions: int = 50) -> list[str]:
    """One key per partition of a 50-partition internal topic."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        key = f"{prefix}-{i}"
        found.setdefault(java_partition(key, partitions), key)
        i += 1
    return list(found.values())


def retry(call: Callable[[], T], done: Callable[[T], bool], timeout: float = 60.0) -> T:
    """Repeats ``call`` until ``done`` holds of its answer (for the brokers' start and Kafka's
    settling after an alter, never a scenario's own requests)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)
