"""The message tables agree with Kafka's own message specs.

Kafka publishes every request/response as a JSON spec; kafka-python ships the 4.3 copies. For each
of our tables and every version both sides describe, the fields present in that version must match
in order, name (snake_case of Kafka's), type, nullability, tag, explicit default and ignorability,
recursively. Versions older than the 4.3 minimum (removed by KIP-896) are still described by the
4.3 specs' field ranges, and are also checked against kafka-python's hand-written classes. The
KIP-848 APIs and consumer-group records, which kafka-python does not ship, are checked against
Kafka 4.1's specs as transcribed in ``tests/kafka_specs``.
"""

from __future__ import annotations

import importlib
import importlib.resources
import pkgutil
import re
from typing import Any

import pytest

from protocol.messages import (
    REQUESTS,
    RESPONSES,
    ApiKey,
    offsets_log_consumer_groups,
    offsets_log_streams_groups,
)
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.messages.offsets_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.messages.transaction_log import TransactionLogKey, TransactionLogValue
from protocol.schema import Field, Message, Struct, Versions
from tests.unit.protocol.specs import (
    kafka_spec,
    kafka_view,
    our_type_name,
    our_view,
    snake,
)

# What clients of every Kafka release from 2.0 to 4.3 may send (the union of the brokers' ranges).
EXPECTED_VALID = {
    "Produce": "0-13",
    "Fetch": "0-18",
    "ListOffsets": "0-11",
    "Metadata": "0-13",
    "OffsetCommit": "0-10",
    "OffsetFetch": "0-10",
    "FindCoordinator": "0-6",
    "JoinGroup": "0-9",
    "Heartbeat": "0-4",
    "LeaveGroup": "0-5",
    "SyncGroup": "0-5",
    "DescribeGroups": "0-6",
    "ListGroups": "0-5",
    "SaslHandshake": "0-1",
    "SaslAuthenticate": "0-2",
    "DescribeAcls": "0-3",
    "CreateAcls": "0-3",
    "DeleteAcls": "0-3",
    "DescribeUserScramCredentials": "0",
    "AlterUserScramCredentials": "0",
    # KIP-48 (v0 was removed in Kafka 4.0; older clients still send it).
    "CreateDelegationToken": "0-3",
    "RenewDelegationToken": "0-2",
    "ExpireDelegationToken": "0-2",
    "DescribeDelegationToken": "0-3",
    "ApiVersions": "0-5",  # v5: Kafka 4.4 (KIP-1242)
    "CreateTopics": "0-7",
    "DeleteTopics": "0-6",
    "InitProducerId": "0-6",
    "AddPartitionsToTxn": "0-5",
    "AddOffsetsToTxn": "0-4",
    "EndTxn": "0-5",
    "WriteTxnMarkers": "0-2",
    "TxnOffsetCommit": "0-6",
    "DescribeConfigs": "0-4",
    "CreatePartitions": "0-3",
    "DeleteGroups": "0-3",
    "OffsetDelete": "0",
    "DescribeCluster": "0-2",
    "DescribeTransactions": "0",
    "ListTransactions": "0-2",
    "DeleteRecords": "0-2",
    "OffsetForLeaderEpoch": "0-4",
    "AlterReplicaLogDirs": "0-2",
    "DescribeLogDirs": "1-5",  # v0 only differs in meaning (throttling), not in fields
    "DescribeProducers": "0",
    "UnregisterBroker": "0",
    # KIP-848: as of Kafka 4.1.
    "ConsumerGroupHeartbeat": "0-1",
    "ConsumerGroupDescribe": "0-1",
    # Topology and features (Kafka 4.4's ranges).
    "ElectLeaders": "0-2",
    "AlterPartitionReassignments": "0-1",
    "ListPartitionReassignments": "0",
    "DescribeQuorum": "0-2",
    "UpdateFeatures": "0-2",
    "DescribeTopicPartitions": "0",
    "DescribeClientQuotas": "0-1",
    "AlterClientQuotas": "0-1",
    # KIP-714: as of Kafka 4.4.
    "GetTelemetrySubscriptions": "0",
    "PushTelemetry": "0",
    # Configs.
    "AlterConfigs": "0-2",
    "IncrementalAlterConfigs": "0-1",
    "ListConfigResources": "0-1",
    # KIP-1071: as of Kafka 4.4.
    "StreamsGroupHeartbeat": "0-1",
    "StreamsGroupDescribe": "0-1",
    "StreamsGroupTopologyDescriptionUpdate": "0",
    # KIP-932: the versions Kafka 4.4 serves (v0 was early access, removed).
    "ShareGroupHeartbeat": "1",
    "ShareGroupDescribe": "1",
    "ShareFetch": "1-2",
    "ShareAcknowledge": "1-2",
    "DescribeShareGroupOffsets": "0-1",
    "AlterShareGroupOffsets": "0",
    "DeleteShareGroupOffsets": "0",
    "InitializeShareGroupState": "0",
    "ReadShareGroupState": "0",
    "WriteShareGroupState": "0-1",
    "DeleteShareGroupState": "0",
    "ReadShareGroupStateSummary": "0-1",
}


# The __consumer_offsets schemas are not shipped by any client library; these are Kafka's
# group-coordinator specs in Kafka's own notation.
OFFSETS_LOG_SPECS: dict[str, dict[str, Any]] = {
    "OffsetCommitKey": {
        "validVersions": "0-1",
        "flexibleVersions": "none",
        "fields": [
            {"name": "group", "type": "string", "versions": "0+"},
            {"name": "topic", "type": "string", "versions": "0+"},
            {"name": "partition", "type": "int32", "versions": "0+"},
        ],
    },
    "OffsetCommitValue": {
        "validVersions": "0-4",
        "flexibleVersions": "4+",
        "fields": [
            {"name": "offset", "type": "int64", "versions": "0+"},
            {"name": "leaderEpoch", "type": "int32", "versions": "3+", "default": -1, "ignorable": True},
            {"name": "metadata", "type": "string", "versions": "0+"},
            {"name": "commitTimestamp", "type": "int64", "versions": "0+"},
            {"name": "expireTimestamp", "type": "int64", "versions": "1", "default": -1, "ignorable": True},
        ],
    },
    "GroupMetadataKey": {
        "validVersions": "2",
        "flexibleVersions": "none",
        "fields": [{"name": "group", "type": "string", "versions": "0+"}],
    },
    "GroupMetadataValue": {
        "validVersions": "0-4",
        "flexibleVersions": "4+",
        "fields": [
            {"name": "protocolType", "versions": "0+", "type": "string"},
            {"name": "generation", "versions": "0+", "type": "int32"},
            {"name": "protocol", "versions": "0+", "type": "string", "nullableVersions": "0+"},
            {"name": "leader", "versions": "0+", "type": "string", "nullableVersions": "0+"},
            {
                "name": "currentStateTimestamp",
                "versions": "2+",
                "type": "int64",
                "default": -1,
                "ignorable": True,
            },
            {
                "name": "members",
                "versions": "0+",
                "type": "[]MemberMetadata",
                "fields": [
                    {"name": "memberId", "versions": "0+", "type": "string"},
                    {
                        "name": "groupInstanceId",
                        "versions": "3+",
                        "type": "string",
                        "default": "null",
                        "nullableVersions": "3+",
                        "ignorable": True,
                    },
                    {"name": "clientId", "versions": "0+", "type": "string"},
                    {"name": "clientHost", "versions": "0+", "type": "string"},
                    {"name": "rebalanceTimeout", "versions": "1+", "type": "int32", "ignorable": True},
                    {"name": "sessionTimeout", "versions": "0+", "type": "int32"},
                    {"name": "subscription", "versions": "0+", "type": "bytes"},
                    {"name": "assignment", "versions": "0+", "type": "bytes"},
                ],
            },
        ],
    },
}

ALL_API_MESSAGES: list[Message] = [*REQUESTS.values(), *RESPONSES.values()]
DATA_MESSAGES: list[Message] = [ConsumerProtocolSubscription, ConsumerProtocolAssignment]
CONSUMER_GROUP_LOG_MESSAGES: list[Message] = [
    m for m in vars(offsets_log_consumer_groups).values() if isinstance(m, Message)]
STREAMS_GROUP_LOG_MESSAGES: list[Message] = [
    m for m in vars(offsets_log_streams_groups).values() if isinstance(m, Message)]
LOG_MESSAGES: list[Message] = [OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue,
                               TransactionLogKey, TransactionLogValue, *CONSUMER_GROUP_LOG_MESSAGES,
                               *STREAMS_GROUP_LOG_MESSAGES]
















def versions_to_compare(ours: Message, spec: dict[str, Any]) -> list[int]:
    # Kafka's 4.3 specs still carry the field ranges of the versions KIP-896 removed, so every
    # version of ours up to the spec's newest is compared.
    high = Versions.parse(spec["validVersions"]).high
    return [v for v in ours.versions if v <= high]


@pytest.mark.parametrize("msg", ALL_API_MESSAGES + DATA_MESSAGES, ids=lambda m: m.name)
def test_table_matches_kafka_spec(msg: Message) -> None:
    spec = kafka_spec(msg.name)
    assert msg.api_key == spec.get("apiKey")
    assert msg.flexible == Versions.parse(spec["flexibleVersions"])
    kafka_valid = Versions.parse(spec["validVersions"])
    assert msg.valid.high == kafka_valid.high
    assert msg.valid.low <= kafka_valid.low
    compared = versions_to_compare(msg, spec)
    assert compared == list(msg.versions)
    for v in compared:
        assert our_view(msg.fields, v) == kafka_view(spec["fields"], v, msg.name), f"{msg.name} v{v}"


@pytest.mark.parametrize("msg", LOG_MESSAGES, ids=lambda m: m.name)
def test_offsets_log_table_matches_kafka_spec(msg: Message) -> None:
    spec = OFFSETS_LOG_SPECS[msg.name] if msg.name in OFFSETS_LOG_SPECS else kafka_spec(msg.name)
    assert msg.api_key is None
    assert msg.valid == Versions.parse(spec["validVersions"])
    assert msg.flexible == Versions.parse(spec["flexibleVersions"])
    for v in msg.versions:
        assert our_view(msg.fields, v) == kafka_view(spec["fields"], v, msg.name), f"{msg.name} v{v}"


def test_every_consumer_group_record_table_is_checked() -> None:
    assert len(CONSUMER_GROUP_LOG_MESSAGES) == 14


def test_every_streams_group_record_table_is_checked() -> None:
    assert len(STREAMS_GROUP_LOG_MESSAGES) == 12


def test_version_ranges_cover_kafka_2_0_to_4_3() -> None:
    for key in ApiKey:
        assert str(REQUESTS[key].valid) == EXPECTED_VALID[key.name], key.name
        assert RESPONSES[key].valid == REQUESTS[key].valid
        assert REQUESTS[key].flexible == RESPONSES[key].flexible


def test_registry_is_keyed_by_api_key() -> None:
    assert set(REQUESTS) == set(RESPONSES) == {int(k) for k in ApiKey}
    for key in ApiKey:
        assert REQUESTS[key].api_key == RESPONSES[key].api_key == key
        assert REQUESTS[key].name == f"{key.name}Request"
        assert RESPONSES[key].name == f"{key.name}Response"


def test_module_per_api_named_after_it() -> None:
    for key in ApiKey:
        module = importlib.import_module(f"protocol.messages.{snake(key.name)}")
        assert getattr(module, f"{key.name}Request") is REQUESTS[key]
        assert getattr(module, f"{key.name}Response") is RESPONSES[key]


def test_nested_classes_are_reachable_by_element_name() -> None:
    join = REQUESTS[ApiKey.JoinGroup]
    proto = join.Protocol(name="range", metadata=b"")
    req = join(group_id="g", protocols=[proto])
    assert req.protocols[0].name == "range"
    assert req.rebalance_timeout_ms == -1
    assert req.group_instance_id is None
    commit = REQUESTS[ApiKey.OffsetCommit]
    part = commit.Topic.Partition(partition_index=3, committed_offset=7)
    assert part.committed_leader_epoch == -1
    assert part.committed_metadata == ""
    assert RESPONSES[ApiKey.JoinGroup].Member(member_id="m").group_instance_id is None


# ---- versions KIP-896 removed, against kafka-python's hand-written classes -----------------------

_OLD_TYPES = {
    "Int8": "int8",
    "Int16": "int16",
    "Int32": "int32",
    "Int64": "int64",
    "Boolean": "bool",
    "Bytes": "bytes",
    "String": "string",
    "UUID": "uuid",
}


def _old_classes() -> dict[str, Any]:
    import kafka.protocol.old as old

    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{info.name}")
        for name, obj in vars(module).items():
            if re.fullmatch(r"\w+_v\d+", name) and hasattr(obj, "SCHEMA"):
                found[name] = obj
    return found


def _old_view(schema: Any) -> list[tuple[str, str]]:
    """Flattened (path, type) pairs of an old-style schema."""
    out: list[tuple[str, str]] = []

    def walk(names: Any, types: Any, prefix: str) -> None:
        for name, typ in zip(names, types):
            path = prefix + name
            kind = type(typ).__name__ if not isinstance(typ, type) else typ.__name__
            if kind == "Array":
                inner = typ.array_of
                if hasattr(inner, "names"):
                    out.append((path, "[]struct"))
                    walk(inner.names, inner.fields, path + ".")
                else:
                    inner_kind = inner.__name__ if isinstance(inner, type) else type(inner).__name__
                    out.append((path, "[]" + _OLD_TYPES[inner_kind]))
            else:
                out.append((path, _OLD_TYPES[kind]))

    walk(schema.names, schema.fields, "")
    return out


def _flat_view(fields: list[Field], version: int, prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for fl in fields:
        if version not in fl.versions:
            continue
        path = prefix + fl.name
        if isinstance(fl.type, Struct):
            out.append((path, "[]struct"))
            out.extend(_flat_view(fl.type.fields, version, path + "."))
        else:
            # The hand-written classes declare record sets as the bytes they are on the wire.
            name = our_type_name(fl.type)
            out.append((path, "bytes" if name == "records" else name))
    return out


def _removed_versions() -> list[tuple[Message, int]]:
    pairs: list[tuple[Message, int]] = []
    for msg in ALL_API_MESSAGES:
        low = Versions.parse(kafka_spec(msg.name)["validVersions"]).low
        pairs.extend((msg, v) for v in msg.versions if v < low)
    return pairs


@pytest.mark.parametrize("msg,version", _removed_versions(), ids=lambda x: getattr(x, "name", str(x)))
def test_removed_versions_match_hand_written_classes(msg: Message, version: int) -> None:
    old = _old_classes().get(f"{msg.name}_v{version}")
    if old is None:
        pytest.skip(f"kafka-python has no hand-written {msg.name} v{version}")
    theirs = _old_view(old.SCHEMA)
    ours = _flat_view(msg.fields, version)
    assert [t for _, t in ours] == [t for _, t in theirs]
    # Names agree except where the hand-written classes kept pre-JSON spellings.
    same = sum(a == b for (a, _), (b, _) in zip(ours, theirs))
    assert same >= len(ours) - 2, (ours, theirs)
