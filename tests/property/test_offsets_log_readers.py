"""Every reader of ``__consumer_offsets`` says the same about the same records.

Records of every kind are written by kafka-python as real record batches in a segment file:
offset commits in every value version (key v0 and v1), group metadata in every value version,
versions newer than any Kafka declares written the way a later Kafka adds fields (unknown tags,
and bytes after the struct), tombstones of both, the KIP-848 consumer-group records of every
type (tombstones, and values from a Kafka newer than 4.1 included), the share/streams record types
and key versions nobody defines. The coordinator's replay (what the shard rebuilds), ``kcoord dump-log``,
the analysis decoder's rows, ``protocol.payloads.offsets_log_records`` and kafka-python read them back, and
each must report what was written, by the version rules: a field a version lacks reads as its
default, a newer version reads with the newest layout, and a v0 member's rebalance timeout is its
session timeout (Kafka's loader).
"""

from __future__ import annotations

import tempfile
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.decoder import ConsumerGroupRow, Decoded, decode_segment
from analytics.segments import SegmentHealth
from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.replay_plan import replay_log
from kclient.dump_log import dump_file
from protocol.payloads.offsets_log_records import (
    CONSUMER_GROUP_RECORD_TYPES,
    GROUP_METADATA,
    OFFSET_COMMIT,
    RECORD_TYPES,
    SHARE_GROUP_RECORD_TYPES,
    STREAMS_GROUP_RECORD_TYPES,
    ConsumerGroupRecord,
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
    read_record,
)
from protocol.record_batch import decode_records, iter_batches
from storage.checkpoints import topic_id_from_str, topic_id_to_str
from storage.config import LogConfig
from storage.partition_log import PartitionLog
from tests.property import offsets_log_kafka as kp
from tests.unit.analytics import kafka_bytes as kb

# The records this reader leaves out (see ``replayed_state``).
CONSUMER_GROUP_RECORDS = typing.get_args(ConsumerGroupRecord)

T0 = 1_700_000_000_000
NEWEST = 4  # OffsetCommitValue and GroupMetadataValue: "validVersions": "0-4"

# ---- what is written ---------------------------------------------------------------------------


@dataclass
class Commit:
    key_version: int
    group: str
    topic: str
    partition: int
    version: int | None  # None: a tombstone
    offset: int = 0
    leader_epoch: int = -1
    metadata: str = ""
    commit_ts: int = 0
    expire_ts: int = -1
    tags: dict[int, bytes] = field(default_factory=dict)
    trailing: bytes = b""


@dataclass
class Member:
    member_id: str
    instance: str | None
    client_id: str
    host: str
    rebalance: int
    session: int
    subscription: bytes
    assignment: bytes
    topics: list[str]  # what the consumer protocol bytes say; [] for other protocols
    assigned: list[dict[str, Any]]
    tags: dict[int, bytes]


@dataclass
class Group:
    group: str
    version: int | None  # None: a tombstone
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    state_ts: int = -1
    members: list[Member] = field(default_factory=list)
    tags: dict[int, bytes] = field(default_factory=dict)
    trailing: bytes = b""


@dataclass
class Other:
    key: bytes
    value: bytes | None

    @property
    def key_version(self) -> int:
        return int.from_bytes(self.key[:2], "big", signed=True)


@dataclass
class CGroup:
    """A KIP-848 consumer-group record: its type, key and value (a dict by field name)."""

    record_type: int
    group: str
    second: str | None  # member id (types 5, 7, 8) or regular expression (16)
    version: int | None  # None: a tombstone
    values: dict[str, Any] | None = None
    tags: dict[int, bytes] = field(default_factory=dict)  # fields a later Kafka added
    trailing: bytes = b""


Entry = Commit | Group | CGroup | Other

texts = st.text(max_size=10)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
# Readers show -1 ("none") as null, so these are -1 or a real value, never another negative.
epochs = st.one_of(st.just(-1), st.integers(0, 2**31 - 1))
times = st.one_of(st.just(-1), st.integers(0, 2**62))
value_versions = st.one_of(st.none(), st.integers(0, NEWEST), st.integers(NEWEST + 1, 40))
tag_sets = st.dictionaries(st.integers(0, 300), st.binary(max_size=8), max_size=3).map(
    lambda d: dict(sorted(d.items())))
groups = st.sampled_from(["g1", "g2", "gröup-3"])


def _flexible_extras(draw: st.DrawFn, version: int | None) -> tuple[dict[int, bytes], bytes]:
    tags = draw(tag_sets) if version is not None and version >= NEWEST else {}
    trailing = draw(st.binary(max_size=6)) if version is not None and version > NEWEST else b""
    return tags, trailing


@st.composite
def commits(draw: st.DrawFn) -> Commit:
    version = draw(value_versions)
    tags, trailing = _flexible_extras(draw, version)
    return Commit(draw(st.sampled_from([0, 1])), draw(groups), draw(st.sampled_from(["t", "tópico"])),
                  draw(st.integers(0, 3)), version, draw(int64), draw(epochs), draw(texts), draw(int64),
                  draw(times), tags, trailing)


@st.composite
def members(draw: st.DrawFn, member_id: str, consumer: bool, flexible: bool) -> Member:
    if consumer:
        topics = draw(st.lists(texts, max_size=3))
        by_topic = draw(st.dictionaries(texts, st.lists(st.integers(0, 999), max_size=3), max_size=2))
        subscription, assignment = kb.subscription_v0(topics), kb.assignment_v0(by_topic)
        assigned = [{"topic": t, "partition": p} for t, parts in by_topic.items() for p in parts]
    else:
        topics, assigned = [], []
        subscription, assignment = draw(st.binary(max_size=12)), draw(st.binary(max_size=12))
    return Member(member_id, draw(st.none() | texts), draw(texts), draw(texts), draw(int32), draw(int32),
                  subscription, assignment, topics, assigned, draw(tag_sets) if flexible else {})


@st.composite
def group_records(draw: st.DrawFn) -> Group:
    version = draw(value_versions)
    name = draw(groups)
    if version is None:
        return Group(name, None)
    tags, trailing = _flexible_extras(draw, version)
    protocol_type = draw(st.sampled_from(["consumer", "connect", ""]))
    ids = draw(st.lists(st.text(min_size=1, max_size=8), max_size=3, unique=True))
    flexible = version >= NEWEST
    group_members = [draw(members(i, protocol_type == "consumer", flexible)) for i in ids]
    return Group(name, version, protocol_type, draw(int32), draw(st.none() | texts), draw(st.none() | texts),
                 draw(times), group_members, tags, trailing)


# The removed type 9, the streams type Kafka 4.4 no longer writes (18) and others named, not decoded
# here, and types no Kafka defines. (Share-group records, types 10-15, and streams-group records,
# 17 and 19-23, are decoded: their own tests cover them.)
other_versions = st.one_of(st.sampled_from([t for t in RECORD_TYPES if t > 2 and t not in CONSUMER_GROUP_RECORD_TYPES
                                            and t not in SHARE_GROUP_RECORD_TYPES
                                            and t not in STREAMS_GROUP_RECORD_TYPES]),
                           st.integers(max(RECORD_TYPES) + 1, 2**15 - 1), st.integers(-(2**15), -1))

NULLABLE = {"instance_id", "rack_id", "subscribed_topic_regex", "server_assignor"}


def _value_of(name: str, typ: Any) -> st.SearchStrategy[Any]:
    if isinstance(typ, list):
        return st.fixed_dictionaries({n: _value_of(n, t) for n, t in typ})
    if isinstance(typ, tuple):
        return st.lists(_value_of(name, typ[1]), max_size=3)
    if typ == "uuid":
        return st.one_of(st.just(bytes(16)), st.binary(min_size=16, max_size=16))
    if typ is kp.CompactBytes:
        return st.binary(max_size=6)
    if isinstance(typ, kp.CompactString):
        return st.none() | texts if name in NULLABLE else texts
    bits = {kp.Int8: 8, kp.Int32: 32, kp.Int64: 64}[typ]
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _tagged(record_type: int) -> dict[str, st.SearchStrategy[Any]]:
    if record_type == 3:
        return {"metadata_hash": int64}
    if record_type == 5:
        return {"classic_member_metadata": st.none() | _value_of("", kp.CLASSIC_MEMBER_METADATA)}
    if record_type == 6:
        return {"assignment_timestamp": int64}
    return {}


cg_versions = st.one_of(st.none(), st.just(kp.NEWEST_CONSUMER_GROUP_VALUE), st.integers(1, 40))
# Tags above 0: tag 0 is the declared tagged field of types 3, 5 and 6.
unknown_tags = st.dictionaries(st.integers(1, 300), st.binary(max_size=8), max_size=3)


@st.composite
def consumer_group_records(draw: st.DrawFn) -> CGroup:
    record_type = draw(st.sampled_from(sorted(CONSUMER_GROUP_RECORD_TYPES)))
    second = None
    if record_type in (5, 7, 8):
        second = draw(st.sampled_from(["m-1", "m-2"]))
    elif record_type == 16:
        second = draw(st.sampled_from(["orders-.*", "[a-z]+"]))
    version = draw(cg_versions)
    entry = CGroup(record_type, draw(groups), second, version)
    if version is None:
        return entry
    spec = kp.CONSUMER_GROUP_VALUES[record_type]
    entry.values = draw(st.fixed_dictionaries({**{n: _value_of(n, t) for n, t in spec}, **_tagged(record_type)}))
    if version > kp.NEWEST_CONSUMER_GROUP_VALUE:
        entry.tags = draw(unknown_tags)
        entry.trailing = draw(st.binary(max_size=6))
    return entry



@st.composite
def others(draw: st.DrawFn) -> Other:
    key = draw(other_versions).to_bytes(2, "big", signed=True) + draw(st.binary(max_size=10))
    return Other(key, draw(st.none() | st.binary(max_size=10)))


entries = st.lists(st.one_of(commits(), group_records(), consumer_group_records(), others()), max_size=25)


def encode(entry: Entry) -> tuple[bytes, bytes | None]:
    """The record's bytes, by kafka-python."""
    if isinstance(entry, Other):
        return entry.key, entry.value
    if isinstance(entry, CGroup):
        key = kp.consumer_group_key(entry.record_type, entry.group, entry.second)
        if entry.values is None or entry.version is None:
            return key, None
        return key, kp.encode_consumer_group_value(entry.record_type, entry.version, entry.values, entry.tags,
                                                   entry.trailing)
    if isinstance(entry, Commit):
        key = kp.commit_key(entry.key_version, entry.group, entry.topic, entry.partition)
        if entry.version is None:
            return key, None
        return key, kp.encode_commit_value(entry.version, {
            "offset": entry.offset, "leader_epoch": entry.leader_epoch, "metadata": entry.metadata,
            "commit_timestamp": entry.commit_ts, "expire_timestamp": entry.expire_ts, "tags": entry.tags,
        }, entry.trailing)
    key = kp.group_key(entry.group)
    if entry.version is None:
        return key, None
    return key, kp.encode_group_value(entry.version, {
        "protocol_type": entry.protocol_type, "generation": entry.generation, "protocol": entry.protocol,
        "leader": entry.leader, "current_state_timestamp": entry.state_ts, "tags": entry.tags,
        "members": [{"member_id": m.member_id, "group_instance_id": m.instance, "client_id": m.client_id,
                     "client_host": m.host, "rebalance_timeout": m.rebalance, "session_timeout": m.session,
                     "subscription": m.subscription, "assignment": m.assignment, "tags": m.tags}
                    for m in entry.members],
    }, entry.trailing)


# ---- what every reader must report -----------------------------------------------------------
# A fact: ("commit", log offset, timestamp, group, topic, partition, value facts or None)
#         ("group", log offset, timestamp, group, value facts or None)
#         ("cg", log offset, timestamp, record type, group, member id or regex, value dict or None)
#         ("other", log offset, timestamp, key version)
# Member facts end with the subscription and assignment: raw bytes, or for the analysis decoder
# (which has no bytes) what the consumer protocol says.


def none_if_absent(x: int) -> int | None:
    return None if x == -1 else x


def expected(entry: Entry, offset: int, ts: int, decoded_members: bool = False) -> tuple[Any, ...]:
    if isinstance(entry, Other):
        return ("other", offset, ts, entry.key_version)
    if isinstance(entry, CGroup):
        return ("cg", offset, ts, entry.record_type, entry.group, entry.second, entry.values)
    if isinstance(entry, Commit):
        head = ("commit", offset, ts, entry.group, entry.topic, entry.partition)
        if entry.version is None:
            return (*head, None)
        layout = min(entry.version, NEWEST)
        return (*head, (entry.offset, none_if_absent(entry.leader_epoch) if layout >= 3 else None,
                        entry.metadata, entry.commit_ts, none_if_absent(entry.expire_ts) if layout == 1 else None))
    if entry.version is None:
        return ("group", offset, ts, entry.group, None)
    layout = min(entry.version, NEWEST)
    member_facts = tuple(
        (m.member_id, m.instance if layout >= 3 else None, m.client_id, m.host,
         m.rebalance if layout >= 1 else m.session, m.session,
         *((m.topics, m.assigned) if decoded_members else (m.subscription, m.assignment)))
        for m in entry.members)
    return ("group", offset, ts, entry.group, (
        entry.protocol_type, entry.generation, entry.protocol, entry.leader,
        none_if_absent(entry.state_ts) if layout >= 2 else None, member_facts))


def commit_facts(value: Any) -> tuple[Any, ...]:
    return (value.offset, none_if_absent(value.leader_epoch), value.metadata, value.commit_timestamp,
            none_if_absent(value.expire_timestamp))


def group_facts(value: Any, rebalance_of: Any = None) -> tuple[Any, ...]:
    return (value.protocol_type, value.generation, value.protocol, value.leader,
            none_if_absent(value.current_state_timestamp),
            tuple((m.member_id, m.group_instance_id, m.client_id, m.client_host,
                   m.rebalance_timeout if rebalance_of is None else rebalance_of(m), m.session_timeout,
                   m.subscription, m.assignment) for m in value.members))


class Attrs:
    """Field access on a decoded dict, so the same fact builders read dicts and structs."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)


# ---- the readers ---------------------------------------------------------------------------------


def raw_records(data: bytes) -> list[tuple[int, int, bytes, bytes | None]]:
    out = []
    for batch in iter_batches(data):
        for rec in decode_records(batch):
            assert rec.key is not None
            out.append((batch.base_offset + rec.offset_delta, batch.base_timestamp + rec.timestamp_delta,
                        rec.key, rec.value))
    return out


def home_facts(data: bytes, written: list[Entry]) -> list[tuple[Any, ...]]:
    facts = []
    for (offset, ts, key, value), entry in zip(raw_records(data), written, strict=True):
        rec = read_record(key, value)
        if rec.key is None:
            assert rec.type_name == RECORD_TYPES.get(rec.key_version)
            facts.append(("other", offset, ts, rec.key_version))
            continue
        assert rec.value_version == getattr(entry, "version", None)
        if rec.key_version in CONSUMER_GROUP_RECORD_TYPES:
            assert rec.newer_than_known == (rec.value_version is not None and rec.value_version > 0)
            second = getattr(rec.key, "member_id", None) or getattr(rec.key, "regular_expression", None)
            facts.append(("cg", offset, ts, rec.key_version, rec.key.group_id, second,
                          None if rec.value is None else rec.value.to_dict()))
            continue
        assert rec.newer_than_known == (rec.value_version is not None and rec.value_version > NEWEST)
        if rec.type_name == OFFSET_COMMIT:
            k = rec.key
            facts.append(("commit", offset, ts, k.group, k.topic, k.partition,
                          None if rec.value is None else commit_facts(rec.value)))
        else:
            assert rec.type_name == GROUP_METADATA
            version = rec.value_version
            facts.append(("group", offset, ts, rec.key.group, None if rec.value is None else group_facts(
                rec.value, lambda m, v=version: m.session_timeout if v == 0 else m.rebalance_timeout)))
    return facts


def coordinator_facts(data: bytes) -> list[tuple[Any, ...]]:
    """What replay hands the shard, record by record (``decode_record``)."""
    facts = []
    for offset, ts, key, value in raw_records(data):
        rec = decode_record(key, value)
        if rec is None:
            facts.append(("other", offset, ts, int.from_bytes(key[:2], "big", signed=True)))
        elif not isinstance(rec, (OffsetCommitRecord, GroupMetadataRecord)):
            assert rec.group == rec[0]  # every record names its group first
            facts.append(("cg", offset, ts, int.from_bytes(key[:2], "big"), rec.group, rec[1] if len(rec) == 3 else None,
                          None if rec.value is None else rec.value.to_dict()))
        elif isinstance(rec, OffsetCommitRecord):
            facts.append(("commit", offset, ts, rec.group, rec.topic, rec.partition,
                          None if rec.value is None else commit_facts(rec.value)))
        else:
            assert isinstance(rec, GroupMetadataRecord)
            facts.append(("group", offset, ts, rec.group, None if rec.value is None else group_facts(rec.value)))
    return facts


def kafka_python_facts(data: bytes) -> list[tuple[Any, ...]]:
    facts = []
    for offset, ts, key, value in raw_records(data):
        version = int.from_bytes(key[:2], "big", signed=True)
        if version in kp.CONSUMER_GROUP_VALUES:
            glen = int.from_bytes(key[2:4], "big")
            group = key[4:4 + glen].decode()
            rest = key[4 + glen:]
            second = rest[2:].decode() if rest else None
            v = None if value is None else kp.decode_consumer_group_value(version, value)[1]
            facts.append(("cg", offset, ts, version, group, second, v))
        elif version in (0, 1):
            group, topic, partition = kb_commit_key(key)
            if value is None:
                facts.append(("commit", offset, ts, group, topic, partition, None))
                continue
            _, v = kp.decode_commit_value(value)
            v.setdefault("leader_epoch", -1)
            v.setdefault("expire_timestamp", -1)
            facts.append(("commit", offset, ts, group, topic, partition, commit_facts(Attrs(v))))
        elif version == 2:
            group = key[4:].decode()
            if value is None:
                facts.append(("group", offset, ts, group, None))
                continue
            _, v = kp.decode_group_value(value)
            v.setdefault("current_state_timestamp", -1)
            ms = []
            for m in v["members"]:
                m.setdefault("group_instance_id", None)
                m.setdefault("rebalance_timeout", m["session_timeout"])  # v0: Kafka's loader
                ms.append(Attrs(m))
            facts.append(("group", offset, ts, group, group_facts(Attrs({**v, "members": ms}))))
        else:
            facts.append(("other", offset, ts, version))
    return facts


def kb_commit_key(key: bytes) -> tuple[str, str, int]:
    glen = int.from_bytes(key[2:4], "big")
    group = key[4:4 + glen].decode()
    tlen = int.from_bytes(key[4 + glen:6 + glen], "big")
    topic = key[6 + glen:6 + glen + tlen].decode()
    return group, topic, int.from_bytes(key[6 + glen + tlen:], "big", signed=True)


def dump_facts(path: Path, written: list[Entry]) -> list[tuple[Any, ...]]:
    facts = []
    entries = [r for item in dump_file(path) for r in item["records"]]
    assert len(entries) == len(written)
    for rec, entry in zip(entries, written, strict=True):
        offset, ts, key, payload = rec["offset"], rec["CreateTime"], rec["key"], rec["payload"]
        if isinstance(key["data"], str):
            name = RECORD_TYPES.get(int(key["type"]))
            assert key["data"] == ("unknown record type" if name is None else f"{name} record, not decoded")
            facts.append(("other", offset, ts, int(key["type"])))
            continue
        k = key["data"]
        if isinstance(entry, CGroup):
            if payload is not None:
                assert payload["version"] == str(entry.version)
                assert payload.get("readAs") == ("0" if entry.version else None)
            second = k.get("member_id", k.get("regular_expression"))
            facts.append(("cg", offset, ts, int(key["type"]), k["group_id"], second,
                          None if payload is None else from_dump_json(payload["data"])))
            continue
        if payload is not None:
            written_version = getattr(entry, "version", None)
            assert payload["version"] == str(written_version)
            assert payload.get("readAs") == (str(NEWEST) if written_version > NEWEST else None)
        if key["type"] in ("0", "1"):
            facts.append(("commit", offset, ts, k["group"], k["topic"], k["partition"],
                          None if payload is None else commit_facts(Attrs(payload["data"]))))
            continue
        if payload is None:
            facts.append(("group", offset, ts, k["group"], None))
            continue
        v = payload["data"]
        layout = int(payload.get("readAs", payload["version"]))
        # The dump shows each struct as stored: a v0 member's rebalance timeout reads 0 there.
        ms = [Attrs({**m, "subscription": bytes.fromhex(m["subscription"]), "assignment": bytes.fromhex(m["assignment"]),
                     "rebalance_timeout": m["session_timeout"] if layout == 0 else m["rebalance_timeout"]})
              for m in v["members"]]
        facts.append(("group", offset, ts, k["group"], group_facts(Attrs({**v, "members": ms}))))
    return facts


def from_dump_json(obj: Any, name: str = "") -> Any:
    """A dumped value back in the written form: topic ids as bytes (the dump shows them as Kafka
    does), a classic protocol's metadata as bytes (hex in the dump)."""
    if isinstance(obj, dict):
        return {k: from_dump_json(v, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_dump_json(v, name) for v in obj]
    if name == "topic_id":
        return topic_id_from_str(obj)
    if name == "metadata":
        return bytes.fromhex(obj)
    return obj


def _ids(topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"topic_id": topic_id_to_str(t["topic_id"]), "partitions": t["partitions"]} for t in topics]


def expected_row(entry: CGroup, offset: int, ts: int) -> tuple[Any, ...]:
    """What the analysis decoder's row of a consumer-group record holds."""
    fields: dict[str, Any] = {}
    v = entry.values
    t = entry.record_type
    if v is not None:
        if t == 3:
            fields = {"epoch": v["epoch"], "metadata_hash": v["metadata_hash"]}
        elif t == 4:
            fields = {"topics_metadata": [{"topic_id": topic_id_to_str(x["topic_id"]), "topic_name": x["topic_name"],
                                           "num_partitions": x["num_partitions"]} for x in v["topics"]]}
        elif t == 5:
            classic = v["classic_member_metadata"]
            fields = {"consumer_member": {
                **{n: v[n] for n in ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                                     "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor")},
                "classic_session_timeout_ms": None if classic is None else classic["session_timeout_ms"],
                "classic_protocols": None if classic is None else [p["name"] for p in classic["supported_protocols"]]}}
        elif t == 6:
            fields = {"epoch": v["assignment_epoch"]}
        elif t == 7:
            fields = {"assignment": _ids(v["topic_partitions"])}
        elif t == 8:
            fields = {"epoch": v["member_epoch"], "previous_member_epoch": v["previous_member_epoch"],
                      "member_state": v["state"], "assignment": _ids(v["assigned_partitions"]),
                      "pending_revocation": _ids(v["partitions_pending_revocation"])}
        else:
            fields = {"resolved_topics": v["topics"], "regex_version": v["version"],
                      "regex_resolved_at": v["timestamp"]}
    member, regex = (entry.second, None) if t != 16 else (None, entry.second)
    return (offset, ts, entry.group, RECORD_TYPES[t], entry.values is None, member, regex, fields)


def row_facts(row: ConsumerGroupRow) -> tuple[Any, ...]:
    fields = {n: getattr(row, n) for n in ("epoch", "previous_member_epoch", "member_state", "metadata_hash",
                                           "assignment", "pending_revocation", "consumer_member", "topics_metadata",
                                           "resolved_topics", "regex_version", "regex_resolved_at")
              if getattr(row, n) is not None}
    return (row.log_offset, row.timestamp, row.group, row.record_type, row.tombstone, row.member_id,
            row.regular_expression, fields)


def analysis_facts(data: bytes) -> tuple[list[tuple[Any, ...]], int]:
    """(commit and group facts in log order, records skipped) from the decoder's rows."""
    health = SegmentHealth()
    out = Decoded()
    for chunk in decode_segment(data, health, chunk_rows=4):
        out.commits.extend(chunk.commits)
        out.groups.extend(chunk.groups)
        out.consumer_groups.extend(chunk.consumer_groups)
        out.skipped += chunk.skipped
        assert chunk.undecodable == 0
    assert health.problems == []
    c = out.commits
    facts: list[tuple[Any, ...]] = [
        ("commit", *row[:5], None if row[10] else row[5:10])
        for row in zip(c.log_offset, c.timestamp, c.group, c.topic, c.partition, c.offset, c.leader_epoch,
                       c.metadata, c.commit_timestamp, c.expire_timestamp, c.tombstone)]
    for g in out.groups:
        if g.tombstone:
            facts.append(("group", g.log_offset, g.timestamp, g.group, None))
            continue
        assert g.members is not None
        members = tuple((m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                         m["rebalance_timeout"], m["session_timeout"], m["subscribed_topics"],
                         m["assigned_partitions"]) for m in g.members)
        facts.append(("group", g.log_offset, g.timestamp, g.group, (
            g.protocol_type, g.generation, g.protocol, g.leader, g.current_state_timestamp, members)))
    facts.extend(("cg", *row_facts(r)) for r in out.consumer_groups)
    return sorted(facts, key=lambda f: f[1]), out.skipped


class AnyTopic:
    def partition_count(self, topic: str) -> int | None:
        return 8


def replayed_state(directory: Path) -> tuple[dict[Any, Any], dict[str, Any], dict[str, Any]]:
    """(offsets, persisted group facts, loaded members' timeouts) of a shard that loaded the log
    the way the broker loads a partition."""
    shard = GroupCoordinatorShard(0, CoordinatorConfig(num_partitions=1), AnyTopic(), lambda p: f"{p}-id")
    log, _ = PartitionLog.open(directory, LogConfig.offsets_topic())
    try:
        # What this reader is compared on is the classic state; consumer-group records here are
        # random, not a history a coordinator could write (their decoding is the home's, checked
        # by the other readers).
        replay_log(log.batches, lambda rec, offset: None if isinstance(rec, CONSUMER_GROUP_RECORDS)
                   else shard.replay(rec, offset))
    finally:
        log.close()
    state: Any = shard.state
    offsets = {(g, t, p): (o.offset, none_if_absent(o.leader_epoch), o.metadata, o.commit_timestamp,
                           o.expire_timestamp)
               for g, parts in state.offsets.snapshot().items() for (t, p), o in parts.items()}
    persisted = {g: group_facts(v) for g, v in state.persisted.items()}
    timeouts = {g: {mid: (m.rebalance_timeout_ms, m.session_timeout_ms) for mid, m in state.groups[g].members.items()}
                for g in state.persisted}
    return offsets, persisted, timeouts


def folded(facts: list[tuple[Any, ...]]) -> tuple[dict[Any, Any], dict[str, Any], dict[str, Any]]:
    """The latest value per key, as replaying in log order leaves it."""
    offsets: dict[Any, Any] = {}
    groups_now: dict[str, Any] = {}
    for f in facts:
        if f[0] == "commit":
            key = f[3:6]
            if f[6] is None:
                offsets.pop(key, None)
            else:
                offsets[key] = f[6]
        elif f[0] == "group":
            if f[4] is None:
                groups_now.pop(f[3], None)
            else:
                groups_now[f[3]] = f[4]
    timeouts = {g: {m[0]: (m[4], m[5]) for m in v[5]} for g, v in groups_now.items()}
    return offsets, groups_now, timeouts


# ---- the property --------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=entries, batch_size=st.integers(1, 6), gaps=st.lists(st.integers(0, 5000), min_size=25, max_size=25))
def test_every_reader_reports_what_was_written(written: list[Entry], batch_size: int, gaps: list[int]) -> None:
    stamps = [T0 + sum(gaps[: i + 1]) for i in range(len(written))]
    data = b"".join(
        kb.batch(i, [(*encode(e), ts) for e, ts in zip(written[i:i + batch_size], stamps[i:i + batch_size])])
        for i in range(0, len(written), batch_size))
    want = [expected(e, i, ts) for i, (e, ts) in enumerate(zip(written, stamps))]
    want_rows = [("cg", *expected_row(e, i, ts)) if isinstance(e, CGroup) else expected(e, i, ts, decoded_members=True)
                 for i, (e, ts) in enumerate(zip(written, stamps)) if not isinstance(e, Other)]

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "__consumer_offsets-0"
        directory.mkdir()
        segment = directory / "00000000000000000000.log"
        segment.write_bytes(data)

        assert home_facts(data, written) == want
        assert coordinator_facts(data) == want
        assert kafka_python_facts(data) == want
        assert dump_facts(segment, written) == want
        rows, skipped = analysis_facts(data)
        assert rows == want_rows
        assert skipped == sum(isinstance(e, Other) for e in written)
        assert replayed_state(directory) == folded(want)
