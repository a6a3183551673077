"""Every message at every version survives encode -> decode, and the fast codec and the construct
reference codec of the same table produce and accept the same bytes.

Values are generated from the tables themselves: only fields present in the version are drawn,
nulls only where the version allows them, integers within their wire width.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.messages import REQUESTS, RESPONSES, offsets_log_consumer_groups
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
)
from protocol.schema import ArrayOf, Data, Field, Message, Primitive, Struct

MESSAGES: list[Message] = [
    *REQUESTS.values(),
    *RESPONSES.values(),
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
    OffsetCommitKey,
    OffsetCommitValue,
    GroupMetadataKey,
    GroupMetadataValue,
    *(m for m in vars(offsets_log_consumer_groups).values() if isinstance(m, Message)),
]
CASES = [(m, v) for m in MESSAGES for v in m.versions]

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT_BITS = {"uint16": 16, "uint32": 32}
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def _primitive(p: Primitive) -> st.SearchStrategy[Any]:
    if p.name in _INT_BITS:
        bits = _INT_BITS[p.name]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if p.name in _UINT_BITS:
        return st.integers(0, 2 ** _UINT_BITS[p.name] - 1)
    if p.name == "bool":
        return st.booleans()
    if p.name == "uuid":
        return st.one_of(st.just(bytes(16)), st.binary(min_size=16, max_size=16))
    if p.name == "float64":
        return st.floats(allow_nan=False)
    if p.name == "string":
        return _TEXT
    if p.name in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(p.name)


def field_strategy(fl: Field, version: int, depth: int) -> st.SearchStrategy[Any]:
    typ = fl.type
    value: st.SearchStrategy[Any]
    if isinstance(typ, Primitive):
        value = _primitive(typ)
    elif isinstance(typ, ArrayOf):
        value = st.lists(_primitive(typ.item), max_size=4)
    elif typ.many:
        value = st.lists(struct_strategy(typ, version, depth + 1), max_size=3 if depth < 2 else 1)
    else:
        value = struct_strategy(typ, version, depth + 1)
    if version in fl.nullable or (isinstance(typ, Struct) and not typ.many and fl.tag is not None):
        # A tagged single struct is absent (None) unless set, like Kafka's null-default structs.
        value = st.one_of(st.none(), value)
    return value


def struct_strategy(typ: Struct, version: int, depth: int) -> st.SearchStrategy[Data]:
    assert typ.cls is not None
    return _build(typ.cls, typ.fields, version, depth)


def _build(cls: type[Data], fields: list[Field], version: int, depth: int) -> st.SearchStrategy[Data]:
    drawn = {fl.name: field_strategy(fl, version, depth) for fl in fields if version in fl.versions}
    return st.fixed_dictionaries(drawn).map(lambda kw: cls(**kw))


_STRATEGIES: dict[tuple[str, int], st.SearchStrategy[Data]] = {}


def message_strategy(msg: Message, version: int) -> st.SearchStrategy[Data]:
    key = (msg.name, version)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _build(msg.cls, msg.fields, version, 0)
    return _STRATEGIES[key]


def _id(case: Any) -> str:
    return case.name if isinstance(case, Message) else f"v{case}"


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("msg,version", CASES, ids=_id)
@SETTINGS
@given(data=st.data())
def test_round_trip_and_reference_agreement(msg: Message, version: int, data: st.DataObject) -> None:
    obj = data.draw(message_strategy(msg, version))
    wire = msg.encode(obj, version)
    assert msg.decode(wire, version) == obj
    ref = msg.reference(version)
    assert ref.build(obj) == wire
    assert ref.parse(wire) == obj


@settings(max_examples=60, deadline=None)
@given(data=st.data(), version=st.integers(0, 3))
def test_consumer_protocol_blobs_round_trip(data: st.DataObject, version: int) -> None:
    sub = data.draw(message_strategy(ConsumerProtocolSubscription, version))
    assert decode_subscription(encode_subscription(sub, version)) == sub
    asg = data.draw(message_strategy(ConsumerProtocolAssignment, version))
    assert decode_assignment(encode_assignment(asg, version)) == asg
