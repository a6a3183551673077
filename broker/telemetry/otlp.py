"""A reader of OpenTelemetry's MetricsData (opentelemetry/proto/metrics/v1/metrics.proto, protobuf)
for what KIP-714 clients push: gauges, sums and histograms, with their attributes and their
resource's. A minimal protobuf reader of our own: only the fields read here are decoded, every
other field is skipped by its wire type, and malformed input raises ``OtlpError``."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_SFIXED64 = struct.Struct("<q")

Attributes = tuple[tuple[str, str], ...]


class OtlpError(ValueError):
    """The bytes are not a MetricsData message."""


@dataclass(frozen=True, slots=True)
class Point:
    """One data point: the metric's name and kind (gauge, sum, histogram), its attributes (the
    point's, after the resource's), and its value (a histogram's count and sum as two points
    named ``<name>.count`` and ``<name>.sum``)."""

    name: str
    kind: str
    attributes: Attributes
    value: float
    monotonic: bool = False


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise OtlpError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): an int for varint and fixed types, bytes for
    length-delimited ones."""
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 1:
            if pos + 8 > end:
                raise OtlpError("truncated fixed64")
            yield number, wire, _FIXED64.unpack_from(data, pos)[0]
            pos += 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > end:
                raise OtlpError("truncated field")
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == 5:
            if pos + 4 > end:
                raise OtlpError("truncated fixed32")
            yield number, wire, int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
        else:
            raise OtlpError(f"wire type {wire}")


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise OtlpError("expected a length-delimited field")
    return value


def _int(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise OtlpError("expected a scalar field")
    return value


def _double(value: int | bytes) -> float:
    return float(_DOUBLE.unpack(_FIXED64.pack(_int(value)))[0])


def _any_value(data: bytes) -> str:
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:
            return _bytes(value).decode("utf-8", "replace")
        if number == 2 and wire == 0:
            return "true" if value else "false"
        if number == 3 and wire == 0:
            v = _int(value)
            return str(v - (1 << 64) if v >= 1 << 63 else v)
        if number == 4 and wire == 1:
            return repr(_double(value))
    return ""


def _key_value(data: bytes) -> tuple[str, str]:
    key, text = "", ""
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:
            key = _bytes(value).decode("utf-8", "replace")
        elif number == 2 and wire == 2:
            text = _any_value(_bytes(value))
    return key, text


def _number_point(data: bytes, attribute_field: int) -> tuple[Attributes, float]:
    attributes: list[tuple[str, str]] = []
    number_value = 0.0
    for number, wire, value in fields(data):
        if number == attribute_field and wire == 2:
            attributes.append(_key_value(_bytes(value)))
        elif number == 4 and wire == 1:
            number_value = _double(value)
        elif number == 6 and wire == 1:
            number_value = float(_SFIXED64.unpack(_FIXED64.pack(_int(value)))[0])
    return tuple(attributes), number_value


def _histogram_point(data: bytes) -> tuple[Attributes, float, float]:
    attributes: list[tuple[str, str]] = []
    count, total = 0.0, 0.0
    for number, wire, value in fields(data):
        if number == 9 and wire == 2:
            attributes.append(_key_value(_bytes(value)))
        elif number == 4 and wire == 1:
            count = float(_int(value))
        elif number == 5 and wire == 1:
            total = _double(value)
    return tuple(attributes), count, total


def _metric(data: bytes, resource: Attributes) -> Iterator[Point]:
    name = ""
    bodies: list[tuple[int, bytes]] = []
    for number, wire, value in fields(data):
        if number == 1 and wire == 2:
            name = _bytes(value).decode("utf-8", "replace")
        elif number in (5, 7, 9) and wire == 2:
            bodies.append((number, _bytes(value)))
    for number, body in bodies:
        monotonic = False
        if number == 7:
            for n, w, v in fields(body):
                if n == 3 and w == 0:
                    monotonic = bool(v)
        for n, w, v in fields(body):
            if n != 1 or w != 2:
                continue
            if number == 9:
                attrs, count, total = _histogram_point(_bytes(v))
                yield Point(name + ".count", "histogram", resource + attrs, count, True)
                yield Point(name + ".sum", "histogram", resource + attrs, total, True)
            else:
                attrs, point_value = _number_point(_bytes(v), 7)
                yield Point(name, "sum" if number == 7 else "gauge", resource + attrs, point_value, monotonic)


def metric_points(data: bytes) -> list[Point]:
    """Every data point of a MetricsData message."""
    points: list[Point] = []
    for number, wire, rm in fields(data):
        if number != 1 or wire != 2:
            continue
        resource: Attributes = ()
        scopes: list[bytes] = []
        for n, w, v in fields(_bytes(rm)):
            if n == 1 and w == 2:
                resource = tuple(_key_value(_bytes(a)) for an, aw, a in fields(_bytes(v)) if an == 1 and aw == 2)
            elif n == 2 and w == 2:
                scopes.append(_bytes(v))
        for scope in scopes:
            for n, w, v in fields(scope):
                if n == 2 and w == 2:
                    points.extend(_metric(_bytes(v), resource))
    return points
