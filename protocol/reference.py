"""The construct declaration of every message table: the reference codec.

Each (message, version) becomes a compiled ``construct.Struct``. It is the readable statement
of the wire format and the oracle that the fast codec in ``codec`` is tested against; the
request path uses the fast codec because construct is several times slower.
"""

from __future__ import annotations

from typing import Any

import construct as cs

from protocol.schema import ArrayOf, Data, Field, Message, Primitive, Struct
from protocol.varint import encode_uvarint, read_uvarint

_FIXED: dict[str, Any] = {
    "int8": cs.Int8sb,
    "int16": cs.Int16sb,
    "int32": cs.Int32sb,
    "int64": cs.Int64sb,
    "uint16": cs.Int16ub,
    "uint32": cs.Int32ub,
    "float64": cs.Float64b,
    "bool": cs.Flag,
    "uuid": cs.Bytes(16),
}


class _Length(cs.Construct):
    """A length or count prefix: int16/int32 classic, unsigned varint N+1 compact; -1 = null."""

    def __init__(self, compact: bool, width: int) -> None:
        super().__init__()
        self.compact = compact
        self.fixed = cs.Int16sb if width == 2 else cs.Int32sb

    def _parse(self, stream: Any, context: Any, path: str) -> int:
        if not self.compact:
            return int(self.fixed._parse(stream, context, path))
        raw = bytearray()
        while True:
            b = cs.stream_read(stream, 1, path)[0]
            raw.append(b)
            if b < 0x80:
                break
            if len(raw) > 5:
                raise cs.ConstructError("unsigned varint longer than 5 bytes", path=path)
        value, _ = read_uvarint(bytes(raw), 0)
        return value - 1

    def _build(self, obj: int, stream: Any, context: Any, path: str) -> int:
        if self.compact:
            cs.stream_write(stream, encode_uvarint(obj + 1), len(encode_uvarint(obj + 1)), path)
        else:
            self.fixed._build(obj, stream, context, path)
        return obj


class _Sized(cs.Construct):
    """A string or bytes value behind a ``_Length``; null only where the version allows it."""

    def __init__(self, compact: bool, width: int, nullable: bool, text: bool) -> None:
        super().__init__()
        self.length = _Length(compact, width)
        self.nullable = nullable
        self.text = text

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        n = self.length._parse(stream, context, path)
        if n < 0:
            if not self.nullable:
                raise cs.ConstructError("null in a version where it is not nullable", path=path)
            return None
        data = cs.stream_read(stream, n, path)
        return data.decode() if self.text else data

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            if not self.nullable:
                raise cs.ConstructError("null in a version where it is not nullable", path=path)
            self.length._build(-1, stream, context, path)
            return obj
        data = obj.encode() if self.text else bytes(obj)
        self.length._build(len(data), stream, context, path)
        cs.stream_write(stream, data, len(data), path)
        return obj


class _Array(cs.Construct):
    def __init__(self, item: Any, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.length = _Length(compact, 4)
        self.item = item
        self.nullable = nullable

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        n = self.length._parse(stream, context, path)
        if n < 0:
            if not self.nullable:
                raise cs.ConstructError("null array in a version where it is not nullable", path=path)
            return None
        return [self.item._parsereport(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            self.length._build(-1, stream, context, path)
            return obj
        self.length._build(len(obj), stream, context, path)
        for item in obj:
            self.item._build(item, stream, context, path)
        return obj


class _Optional(cs.Construct):
    """A nullable struct: int8 -1 for null, 1 then the struct."""

    def __init__(self, sub: Any) -> None:
        super().__init__()
        self.sub = sub

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        marker = cs.Int8sb._parse(stream, context, path)
        return None if marker < 0 else self.sub._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            cs.Int8sb._build(-1, stream, context, path)
        else:
            cs.Int8sb._build(1, stream, context, path)
            self.sub._build(obj, stream, context, path)
        return obj


class _TaggedFields(cs.Construct):
    """The tagged-field block ending every struct of a flexible version: known tags decode into a
    dict by field name, unknown tags are skipped, defaults are not written."""

    def __init__(self, known: dict[int, tuple[str, Any, Any]]) -> None:
        super().__init__()
        self.known = known
        self.uv = _Length(True, 4)

    def _parse(self, stream: Any, context: Any, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _ in range(self.uv._parse(stream, context, path) + 1):
            tag = self.uv._parse(stream, context, path) + 1
            size = self.uv._parse(stream, context, path) + 1
            data = cs.stream_read(stream, size, path)
            if tag in self.known:
                name, con, _ = self.known[tag]
                out[name] = con.parse(data)
        return out

    def _build(self, obj: dict[str, Any], stream: Any, context: Any, path: str) -> Any:
        items = []
        for tag in sorted(self.known):
            name, con, default = self.known[tag]
            value = obj.get(name, default)
            if value != default:
                items.append((tag, con.build(value)))
        self.uv._build(len(items) - 1, stream, context, path)
        for tag, data in items:
            self.uv._build(tag - 1, stream, context, path)
            self.uv._build(len(data) - 1, stream, context, path)
            cs.stream_write(stream, data, len(data), path)
        return obj


def _value_construct(typ: Any, version: int, flexible: bool, nullable: bool) -> Any:
    if isinstance(typ, Primitive):
        if typ.name in _FIXED:
            return _FIXED[typ.name]
        width = 2 if typ.name == "string" else 4
        return _Sized(flexible, width, nullable or typ.name == "records", typ.name == "string")
    if isinstance(typ, Struct):
        sub = _struct_construct(typ.fields, version, flexible)
        if typ.many:
            return _Array(sub, flexible, nullable)
        return _Optional(sub) if nullable else sub
    assert isinstance(typ, ArrayOf)
    return _Array(_value_construct(typ.item, version, flexible, False), flexible, nullable)


def _struct_construct(fields: list[Field], version: int, flexible: bool) -> Any:
    parts = []
    known: dict[int, tuple[str, Any, Any]] = {}
    for fl in fields:
        if version not in fl.versions:
            continue
        con = _value_construct(fl.type, version, flexible, version in fl.nullable)
        if fl.tag is not None:
            if flexible:
                known[fl.tag] = (fl.name, con, fl.default_value())
            continue
        parts.append(fl.name / con)
    if flexible:
        parts.append("_tagged" / _TaggedFields(known))
    return cs.Struct(*parts)


class ReferenceCodec:
    """construct's view of one message version, converting to and from our data classes."""

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        self.construct = _struct_construct(message.fields, version, message.is_flexible(version)).compile()

    def parse(self, data: bytes) -> Any:
        return _from_container(self.construct.parse(data), self.message.fields, self.message.cls, self.version)

    def build(self, obj: Any) -> bytes:
        return bytes(self.construct.build(_to_container(obj, self.message.fields, self.version)))


def _to_container(obj: Data, fields: list[Field], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[str, Any] = {}
    for fl in fields:
        if version not in fl.versions:
            continue
        value = _convert_out(getattr(obj, fl.name), fl.type, version)
        (tagged if fl.tag is not None else out)[fl.name] = value
    out["_tagged"] = tagged
    return out


def _convert_out(value: Any, typ: Any, version: int) -> Any:
    if isinstance(typ, Struct) and value is not None:
        if typ.many:
            return [_to_container(v, typ.fields, version) for v in value]
        return _to_container(value, typ.fields, version)
    return value


def _from_container(con: Any, fields: list[Field], cls: type[Data] | None, version: int) -> Data:
    assert cls is not None
    values: dict[str, Any] = {}
    tagged = con.get("_tagged", {}) if hasattr(con, "get") else {}
    for fl in fields:
        if version not in fl.versions:
            continue
        if fl.tag is not None:
            if fl.name not in tagged:
                continue
            raw = tagged[fl.name]
        else:
            raw = con[fl.name]
        values[fl.name] = _convert_in(raw, fl.type, version)
    return cls(**values)


def _convert_in(value: Any, typ: Any, version: int) -> Any:
    if isinstance(typ, Struct) and value is not None:
        if typ.many:
            return [_from_container(v, typ.fields, typ.cls, version) for v in value]
        return _from_container(value, typ.fields, typ.cls, version)
    if isinstance(value, cs.ListContainer):
        return list(value)
    return value


_CACHE: dict[tuple[int, int], ReferenceCodec] = {}


def reference_codec(message: Message, version: int) -> ReferenceCodec:
    key = (id(message), version)
    if key not in _CACHE:
        _CACHE[key] = ReferenceCodec(message, version)
    return _CACHE[key]
