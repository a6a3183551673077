"""Byte-for-byte agreement with an independent implementation of the protocol.

kafka-python 3 generates its codecs from Kafka's own JSON specs. For every API and version both
sides support, random valid values (drawn from our tables with a fixed seed) must encode to the
same bytes on both sides, and each side must decode the other's bytes back to the same value.
The same goes for the consumer protocol blobs, including their int16 version prefix. The
``__consumer_offsets`` records, which no client library implements, are checked against bytes
laid out by hand from the record format.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import kafka.protocol
import pytest
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.api_message import ApiMessage

from protocol.messages import REQUESTS, RESPONSES
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.messages.offsets_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.payloads.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription_version,
)
from protocol.schema import ArrayOf, Data, Field, Message, Primitive, Struct

SAMPLES_PER_VERSION = 30


def _kafka_python_classes() -> dict[str, Any]:
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" not in info.name and "generate_stubs" not in info.name:
            importlib.import_module(info.name)
    found: dict[str, Any] = {}
    stack: list[type] = [ApiMessage, ApiData]
    while stack:
        cls = stack.pop()
        subclasses: list[type] = cls.__subclasses__()
        for sub in subclasses:
            stack.append(sub)
            if getattr(sub, "_class_version", None) is None:
                found.setdefault(sub.__name__, sub)
    return found


# Every kafka-python protocol module imported (its response classes registered), and what it registered.
_kafka_python_classes()
_KAFKA_PYTHONS_DECODERS = dict(ResponseClassRegistry._response_class_registry)


# kafka-python ships no KIP-848 API; it generates them from Kafka 4.1's specs as transcribed in
# tests/kafka_specs, with the same machinery as every other API.
class ConsumerGroupHeartbeatRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass

# KIP-932, from Kafka 4.4's specs.

class ShareGroupHeartbeatRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareFetchRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareFetchResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# Nor KIP-714's telemetry APIs: Kafka 4.4's specs, transcribed the same way.
class GetTelemetrySubscriptionsRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class PushTelemetryRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class PushTelemetryResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# Nor the KIP-1071 streams-group APIs: Kafka 4.4's specs, as its jar ships them.
class StreamsGroupHeartbeatRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class StreamsGroupHeartbeatResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class StreamsGroupTopologyDescriptionUpdateRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class StreamsGroupTopologyDescriptionUpdateResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# The share coordinator's node-to-node APIs (KIP-932), from Kafka 4.4's specs.
class InitializeShareGroupStateRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# ApiVersions as Kafka 4.4 declares it (v5, KIP-1242; kafka-python ships v0-4), and
# UnregisterBroker, which kafka-python does not ship: Kafka 4.4's specs, as its jar ships them.
class ApiVersionsRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ApiVersionsResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class UnregisterBrokerRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class UnregisterBrokerResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# DeleteGroups as Kafka 4.4 declares it (v3 adds each result's error message; kafka-python ships v0-2).
class DeleteGroupsRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DeleteGroupsResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# TxnOffsetCommit as Kafka 4.4 declares it (v6 names topics by id, KIP-1319; kafka-python ships v0-5).
class TxnOffsetCommitRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class TxnOffsetCommitResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


# The delegation-token APIs (KIP-48), which kafka-python does not ship: Kafka 4.4's specs.
class CreateDelegationTokenRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class CreateDelegationTokenResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class RenewDelegationTokenRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class RenewDelegationTokenResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ExpireDelegationTokenRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class ExpireDelegationTokenResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DescribeDelegationTokenRequest(ApiMessage, load_json="tests.kafka_specs"):
    pass


class DescribeDelegationTokenResponse(ApiMessage, load_json="tests.kafka_specs"):
    pass


KP = _kafka_python_classes()
# The classes above replace kafka-python's own of the same name, here only.
KP.update({cls.__name__: cls for cls in (ApiVersionsRequest, ApiVersionsResponse, UnregisterBrokerRequest,
                                         UnregisterBrokerResponse, DeleteGroupsRequest, DeleteGroupsResponse,
                                         TxnOffsetCommitRequest, TxnOffsetCommitResponse,
                                         CreateDelegationTokenRequest, CreateDelegationTokenResponse, RenewDelegationTokenRequest, RenewDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse, DescribeDelegationTokenRequest, DescribeDelegationTokenResponse)})


# Defining a response class makes it kafka-python's decoder of that API key for the whole process
# (``ResponseClassRegistry``): the kafka-python clients of integration tests that run later in the
# same worker would decode ApiVersions with the oracle's class and fail to bootstrap. kafka-python's
# own decoders, as registered before the classes above were defined, are put back; the oracle uses
# its classes directly and needs no registry.
ResponseClassRegistry._response_class_registry.update(_KAFKA_PYTHONS_DECODERS)


@pytest.fixture(autouse=True)
def _kafka_python_keeps_its_decoders() -> Iterator[None]:
    """Codecs built while a test runs register themselves too: put kafka-python's back after it."""
    yield
    ResponseClassRegistry._response_class_registry.update(_KAFKA_PYTHONS_DECODERS)

# ---- random values drawn from our tables --------------------------------------------------------

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_WORDS = ["", "g", "consumer", "range", "topic-1", "émoji-☕", "x" * 40]


def _prim(rng: random.Random, name: str) -> Any:
    if name in _INT_BITS:
        bits = _INT_BITS[name]
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return rng.choice([lo, hi, -1, 0, 1, rng.randint(lo, hi)])
    if name == "uint16":
        return rng.randint(0, 0xFFFF)
    if name == "bool":
        return rng.random() < 0.5
    if name == "uuid":
        return bytes(16) if rng.random() < 0.3 else rng.randbytes(16)
    if name == "string":
        return rng.choice(_WORDS)
    if name in ("bytes", "records"):
        return rng.randbytes(rng.choice([0, 1, 5, 200]))
    if name == "float64":
        return rng.choice([0.0, 1.5, -2.0, 1e300, rng.random()])
    raise AssertionError(name)


def _value(rng: random.Random, fl: Field, version: int, depth: int) -> Any:
    typ = fl.type
    nullable = version in fl.nullable or (isinstance(typ, Struct) and not typ.many and fl.tag is not None)
    if nullable and rng.random() < 0.25:
        return None
    if isinstance(typ, Primitive):
        return _prim(rng, typ.name)
    if isinstance(typ, ArrayOf):
        return [_prim(rng, typ.item.name) for _ in range(rng.randint(0, 4))]
    if not typ.many:
        return _sample(rng, typ.cls, typ.fields, version, depth + 1)
    count = rng.randint(0, 3 if depth < 2 else 1)
    return [_sample(rng, typ.cls, typ.fields, version, depth + 1) for _ in range(count)]


def _sample(rng: random.Random, cls: Any, fields: list[Field], version: int, depth: int = 0) -> Data:
    values = {fl.name: _value(rng, fl, version, depth) for fl in fields if version in fl.versions}
    obj: Data = cls(**values)
    return obj


def _blank(msg: Message, version: int) -> Data:
    """The message with every field at its default; a struct that may not be null (a default of
    ours is None) as Kafka's default, the struct with its own defaults."""
    obj: Data = msg()
    for fl in msg.fields:
        typ = fl.type
        if (isinstance(typ, Struct) and not typ.many and typ.cls is not None and version in fl.versions
                and version not in fl.nullable and fl.tag is None and getattr(obj, fl.name) is None):
            setattr(obj, fl.name, typ.cls())
    return obj


def samples(msg: Message, version: int) -> list[Data]:
    rng = random.Random(f"{msg.name}/{version}")
    return [_blank(msg, version), *(_sample(rng, msg.cls, msg.fields, version) for _ in range(SAMPLES_PER_VERSION))]


# ---- conversion between our instances and kafka-python's -----------------------------------------


def _kp_field(kp_struct: Any, name: str) -> Any:
    fields = kp_struct.fields
    if name in fields:
        return fields[name]
    # kafka-python renames the authorized-operations bit sets of a few responses.
    if name.endswith("authorized_operations") and "authorized_operations" in fields:
        return fields["authorized_operations"]
    raise KeyError(name)


def _to_bits(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _from_bits(bits: set[int] | None) -> int:
    raw = sum(1 << i for i in ({31} if bits is None else bits))
    return raw - (1 << 32) if raw >= 1 << 31 else raw


def _to_kp_value(value: Any, fl: Field, kf: Any, version: int) -> Any:
    if value is None:
        return None
    typ = fl.type
    if isinstance(typ, Struct):
        if typ.many:
            return [kf.data_class(**_to_kp_fields(v, typ.fields, kf, version)) for v in value]
        return kf.data_class(**_to_kp_fields(value, typ.fields, kf, version))
    if kf.type_str == "bitfield":
        return _to_bits(value)
    if isinstance(typ, Primitive) and typ.name == "uuid":
        return None if value == bytes(16) else uuid.UUID(bytes=value)
    return value


def _to_kp_fields(obj: Data, fields: list[Field], kp_struct: Any, version: int) -> dict[str, Any]:
    out = {}
    for fl in fields:
        if version in fl.versions:
            kf = _kp_field(kp_struct, fl.name)
            out[kf.name] = _to_kp_value(getattr(obj, fl.name), fl, kf, version)
    return out


def _from_kp_value(value: Any, fl: Field, kf: Any, version: int) -> Any:
    typ = fl.type
    if isinstance(typ, Primitive) and typ.name == "uuid":
        return bytes(16) if value is None else value.bytes
    if kf.type_str == "bitfield":
        return _from_bits(value)
    if value is None:
        return None
    if isinstance(typ, Struct):
        assert typ.cls is not None
        if typ.many:
            return [_from_kp(v, typ.cls, typ.fields, kf, version) for v in value]
        return _from_kp(value, typ.cls, typ.fields, kf, version)
    if isinstance(typ, Primitive) and typ.name in ("bytes", "records"):
        return bytes(value)
    return value


def _from_kp(kp_obj: Any, cls: Any, fields: list[Field], kp_struct: Any, version: int) -> Data:
    values = {}
    for fl in fields:
        if version in fl.versions:
            kf = _kp_field(kp_struct, fl.name)
            values[fl.name] = _from_kp_value(getattr(kp_obj, kf.name), fl, kf, version)
    obj: Data = cls(**values)
    return obj


# ---- API messages --------------------------------------------------------------------------------

API_CASES = [
    (m, v)
    for m in [*REQUESTS.values(), *RESPONSES.values()]
    for v in m.versions
    if v <= KP[m.name].max_version
]


def _id(case: Any) -> str:
    return case.name if isinstance(case, Message) else f"v{case}"


@pytest.mark.parametrize("msg,version", API_CASES, ids=_id)
def test_same_bytes_as_kafka_python(msg: Message, version: int) -> None:
    kp_cls = KP[msg.name]
    for obj in samples(msg, version):
        ours = msg.encode(obj, version)
        kp_obj = kp_cls[version](**_to_kp_fields(obj, msg.fields, kp_cls._struct, version))
        theirs = bytes(kp_obj.encode())
        assert ours == theirs, obj
        assert msg.decode(theirs, version) == obj
        if msg.name == "ApiVersionsResponse" and obj.error_code != 0:
            # kafka-python reads any failed ApiVersions answer as a v0 body (its KIP-511 fallback).
            continue
        back = kp_cls[version].decode(ours)
        assert _from_kp(back, msg.cls, msg.fields, kp_cls._struct, version) == obj


def test_every_api_version_is_checked_against_kafka_python() -> None:
    """kafka-python knows every version we declare, so no (API, version) pair escapes the oracle."""
    declared = sum(len(m.versions) for m in [*REQUESTS.values(), *RESPONSES.values()])
    assert len(API_CASES) == declared


# ---- the consumer protocol blobs -----------------------------------------------------------------

BLOBS = [
    (ConsumerProtocolSubscription, encode_subscription, decode_subscription),
    (ConsumerProtocolAssignment, encode_assignment, decode_assignment),
]


@pytest.mark.parametrize("msg,encode,decode", BLOBS, ids=lambda x: getattr(x, "name", ""))
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_consumer_protocol_same_bytes_as_kafka_python(
    msg: Message, encode: Any, decode: Any, version: int
) -> None:
    kp_cls = KP[msg.name]
    for obj in samples(msg, version):
        ours = encode(obj, version)
        theirs = bytes(
            kp_cls(version=version, **_to_kp_fields(obj, msg.fields, kp_cls._struct, version)).encode()
        )
        assert ours == theirs
        assert decode(theirs) == obj
        assert _from_kp(kp_cls.decode(ours), msg.cls, msg.fields, kp_cls._struct, version) == obj


def test_newer_subscription_versions_decode_with_the_newest_known_layout() -> None:
    sub = ConsumerProtocolSubscription(
        topics=["a", "b"],
        user_data=b"u",
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic="a", partitions=[0, 2])],
        generation_id=5,
        rack_id="r1",
    )
    body = encode_subscription(sub, 3)[2:]
    future = struct.pack(">h", 9) + body + b"\x00\x01appended-by-a-later-version"
    assert decode_subscription(future) == sub
    assert subscription_version(future) == 9
    assert decode_assignment(b"") == ConsumerProtocolAssignment()


# ---- __consumer_offsets records ------------------------------------------------------------------


def _s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_offset_commit_key_layout() -> None:
    key = OffsetCommitKey(group="grp", topic="t", partition=7)
    want = _s16("grp") + _s16("t") + struct.pack(">i", 7)
    for version in (0, 1):
        assert OffsetCommitKey.encode(key, version) == want
        assert OffsetCommitKey.decode(want, version) == key


def test_offset_commit_value_layouts() -> None:
    value = OffsetCommitValue(
        offset=42, leader_epoch=3, metadata="m", commit_timestamp=1000, expire_timestamp=2000
    )
    q = lambda n: struct.pack(">q", n)  # noqa: E731
    layouts = {
        0: q(42) + _s16("m") + q(1000),
        1: q(42) + _s16("m") + q(1000) + q(2000),
        2: q(42) + _s16("m") + q(1000),
        3: q(42) + struct.pack(">i", 3) + _s16("m") + q(1000),
        # Flexible: compact string (length + 1) and an empty tagged-field block.
        4: q(42) + struct.pack(">i", 3) + b"\x02m" + q(1000) + b"\x00",
    }
    for version, want in layouts.items():
        assert OffsetCommitValue.encode(value, version) == want, version
        decoded = OffsetCommitValue.decode(want, version)
        assert decoded.offset == 42 and decoded.metadata == "m" and decoded.commit_timestamp == 1000
        assert decoded.expire_timestamp == (2000 if version == 1 else -1)
        assert decoded.leader_epoch == (3 if version >= 3 else -1)


def test_group_metadata_layouts() -> None:
    key = GroupMetadataKey(group="grp")
    assert GroupMetadataKey.encode(key, 2) == _s16("grp")
    member = GroupMetadataValue.MemberMetadata(
        member_id="m-1",
        group_instance_id="i-1",
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout=30000,
        session_timeout=10000,
        subscription=b"\x00\x01",
        assignment=b"",
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="m-1",
        current_state_timestamp=1234,
        members=[member],
    )
    want_v3 = (
        _s16("consumer")
        + struct.pack(">i", 4)
        + _s16("range")
        + _s16("m-1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + _s16("m-1")
        + _s16("i-1")
        + _s16("c")
        + _s16("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + struct.pack(">i", 2)
        + b"\x00\x01"
        + struct.pack(">i", 0)
    )
    assert GroupMetadataValue.encode(value, 3) == want_v3
    assert GroupMetadataValue.decode(want_v3, 3) == value
    empty = GroupMetadataValue(protocol_type="consumer", generation=5, protocol=None, leader=None)
    want_empty_v0 = _s16("consumer") + struct.pack(">i", 5) + b"\xff\xff\xff\xff" + struct.pack(">i", 0)
    assert GroupMetadataValue.encode(empty, 0) == want_empty_v0
    v4 = GroupMetadataValue.encode(value, 4)
    assert v4.startswith(b"\x09consumer" + struct.pack(">i", 4) + b"\x06range\x04m-1")
    assert GroupMetadataValue.decode(v4, 4) == value


def test_kafka_python_clients_keep_their_own_decoders() -> None:
    """The oracle's classes decode nothing for kafka-python's clients in this process: ApiVersions,
    which every kafka-python client sends first, is decoded by kafka-python's own class."""
    registered = ResponseClassRegistry._response_class_registry[ApiVersionsResponse.API_KEY]
    assert registered.__module__ == "kafka.protocol.metadata.api_versions"
