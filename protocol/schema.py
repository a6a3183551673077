"""The declaration language: each Kafka message is written once as a table of fields with
version ranges (the notation of Kafka's JSON message specs), and every per-version codec is
derived from that table (see ``codegen`` for the fast path and ``reference`` for construct).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

MAX_VERSION = 0x7FFF


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``Versions.parse("3+")``, ``"0-2"``, ``"5"``, ``"none"``."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | Versions) -> Versions:
        if isinstance(text, Versions):
            return text
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.low, self.high + 1))

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.low != self.high else str(self.low)


NO_VERSIONS = Versions(1, 0)


@dataclass(frozen=True, slots=True)
class Primitive:
    """A scalar wire type. ``name`` is Kafka's spelling (``int32``, ``string``, ``bytes`` ...)."""

    name: str

    def default(self) -> Any:
        if self.name in ("string",):
            return ""
        if self.name in ("bytes",):
            return b""
        if self.name == "records":
            return None
        if self.name == "bool":
            return False
        if self.name == "uuid":
            return ZERO_UUID
        if self.name == "float64":
            return 0.0
        return 0


ZERO_UUID = bytes(16)

INT8 = Primitive("int8")
INT16 = Primitive("int16")
INT32 = Primitive("int32")
INT64 = Primitive("int64")
UINT16 = Primitive("uint16")
UINT32 = Primitive("uint32")
FLOAT64 = Primitive("float64")
BOOL = Primitive("bool")
UUID = Primitive("uuid")
STRING = Primitive("string")
BYTES = Primitive("bytes")
RECORDS = Primitive("records")


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """An array of a primitive type (``[]int32``, ``[]string``)."""

    item: Primitive


@dataclass(slots=True)
class Struct:
    """A nested struct type: used as an array element (``many=True``) or a single value."""

    name: str
    fields: list[Field]
    many: bool = True
    cls: type[Data] | None = None


FieldType = Primitive | ArrayOf | Struct


@dataclass(slots=True)
class Field:
    name: str
    type: FieldType
    versions: Versions
    nullable: Versions = NO_VERSIONS
    tag: int | None = None
    default: Any = None
    has_default: bool = False
    ignorable: bool = False
    # What the field means, for readers of the typed declarations (``protocol.codegen.typegen``).
    about: str = ""

    def default_value(self) -> Any:
        if self.has_default:
            return self.default
        if isinstance(self.type, Primitive):
            return self.type.default()
        if isinstance(self.type, Struct) and not self.type.many:
            return None
        return []


_UNSET: Any = object()


def f(
    name: str,
    type_: FieldType,
    versions: str = "0+",
    *,
    nullable: str = "none",
    tag: int | None = None,
    default: Any = _UNSET,
    ignorable: bool = False,
    about: str = "",
) -> Field:
    """One row of a message table: ``f("group_instance_id", STRING, "5+", nullable="5+", default=None)``."""
    return Field(
        name=name,
        type=type_,
        versions=Versions.parse(versions),
        nullable=Versions.parse(nullable),
        tag=tag,
        default=None if default is _UNSET else default,
        has_default=default is not _UNSET,
        ignorable=ignorable,
        about=about,
    )


def array(name: str, *fields: Field) -> Struct:
    """An array of structs named ``name`` (the element class becomes ``Parent.<name>``)."""
    return Struct(name, list(fields), many=True)


def struct(name: str, *fields: Field) -> Struct:
    """A single nested struct (Kafka's non-array struct fields)."""
    return Struct(name, list(fields), many=False)


class Data:
    """Base of every generated message/struct class: slotted attributes with defaults."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: tuple[Any, ...] = ()
    # The fields that are an ``error_code`` or hold nested structs, in declaration order: all a
    # search for a response's first error needs to visit.
    _error_fields: tuple[str, ...] = ()

    def __init__(self, **kwargs: Any) -> None:  # replaced per class by ``_generated_init``
        raise TypeError("Data is abstract: use a message class")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Data):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {n: conv(getattr(self, n)) for n in self._fields}

    if not TYPE_CHECKING:
        # Hidden from type checkers: a ``__getattr__`` would make every misspelt field pass as Any.
        def __getattr__(self, name: str) -> Any:  # pragma: no cover - only for clearer errors
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")


def _generated_init(fields: list[Field]) -> Any:
    """A keyword-only ``__init__`` for these fields: objects are built on every request, and a
    generated function is several times faster than looping over ``**kwargs``."""
    env: dict[str, Any] = {"_UNSET": _UNSET}
    params, body = [], []
    for i, fl in enumerate(fields):
        default = fl.default_value()
        if isinstance(default, list):
            params.append(f"{fl.name}=_UNSET")
            body.append(f"    self.{fl.name} = [] if {fl.name} is _UNSET else {fl.name}")
        else:
            env[f"_D{i}"] = default
            params.append(f"{fl.name}=_D{i}")
            body.append(f"    self.{fl.name} = {fl.name}")
    src = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) if fields else \
        "def __init__(self):\n    pass"
    exec(compile(src, "<kafka-message>", "exec"), env)
    return env["__init__"]


def _make_class(name: str, fields: list[Field], qualname: str) -> type[Data]:
    slots = tuple(fl.name for fl in fields)
    ns: dict[str, Any] = {
        "__slots__": slots,
        "_fields": slots,
        "_defaults": tuple(fl.default_value() for fl in fields),
        "_error_fields": tuple(fl.name for fl in fields if fl.name == "error_code" or isinstance(fl.type, Struct)),
        "__qualname__": qualname,
        "__module__": "protocol.messages",
    }
    ns["__init__"] = _generated_init(fields)
    cls = type(name, (Data,), ns)
    for fl in fields:
        if isinstance(fl.type, Struct):
            # A struct shared by several fields gets one class, so all of them hold its instances.
            sub = fl.type.cls or _make_class(fl.type.name, fl.type.fields, f"{qualname}.{fl.type.name}")
            fl.type.cls = sub
            setattr(cls, fl.type.name, sub)
    return cls


@dataclass(eq=False)
class Message:
    """A top-level message (request, response, or a ``__consumer_offsets`` key/value)."""

    name: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[Field]
    cls: type[Data] = field(init=False)

    def __post_init__(self) -> None:
        _check_fields(self.name, self.fields)
        self.cls = _make_class(self.name, self.fields, self.name)
        # Nested struct classes as plain attributes: handlers build responses with
        # ``OffsetCommitResponse.Topic(...)`` on every request, and a lookup that falls through to
        # ``__getattr__`` first raises (and formats) an AttributeError.
        for fl in self.fields:
            if isinstance(fl.type, Struct) and fl.type.name not in self.__dict__:
                self.__dict__[fl.type.name] = fl.type.cls

    def __call__(self, **kwargs: Any) -> Any:
        return self.cls(**kwargs)

    def __instancecheck__(self, obj: object) -> bool:
        # The typed declarations present a message as the class of its instances, so
        # ``isinstance(x, JoinGroupRequest)`` type-checks; this makes it true at run time too.
        return type(obj) is self.cls

    if not TYPE_CHECKING:
        # Hidden from type checkers, which see a message as its class (``MessageClass``): there
        # a ``__getattr__`` would make every misspelt nested class pass as Any.
        def __getattr__(self, name: str) -> Any:
            # Nested struct classes: JoinGroupResponse.Member(...)
            if name.startswith("__"):
                raise AttributeError(name)
            try:
                return getattr(self.__dict__["cls"], name)
            except KeyError:
                raise AttributeError(name) from None

    def decode(self, data: bytes, version: int) -> Any:
        """Body bytes -> instance; raises ``DecodeError`` naming this message and version."""
        from protocol.codec import decode

        return decode(self, data, version)

    def encode(self, obj: Any, version: int) -> bytes:
        from protocol.codec import encode

        return encode(self, obj, version)

    def reference(self, version: int) -> Any:
        """The construct codec of this table at ``version`` (compiled), see ``protocol.reference``."""
        from protocol.reference import reference_codec

        return reference_codec(self, version)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    @property
    def versions(self) -> range:
        return range(self.valid.low, self.valid.high + 1)


if TYPE_CHECKING:
    # The generated stubs (``protocol/messages/*.pyi``, see ``protocol.codegen.typegen``) declare every
    # message as a class whose metaclass derives from ``MessageClass``. Its name then serves, as at
    # run time, as the table that builds, decodes and encodes instances, and also as their type:
    # ``def join_group(req: JoinGroupRequest)``. At run time a message is a ``Message`` holding
    # its generated class in ``cls``; these two classes exist for the type checker only.

    class MessageClass(Message, type):
        """A ``Message`` seen as the class of its instances; each stub narrows ``cls``,
        ``decode`` and ``encode`` to its own class in a metaclass of its own."""

    class MessageData(Data, metaclass=MessageClass):
        """Base of the stubs' top-level message classes (nested structs derive from ``Data``)."""


def message(
    name: str,
    fields: Iterable[Field],
    *,
    api_key: int | None = None,
    valid: str = "0",
    flexible: str = "none",
) -> Message:
    return Message(name, api_key, Versions.parse(valid), Versions.parse(flexible), list(fields))


_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _check_fields(owner: str, fields: list[Field]) -> None:
    seen: set[str] = set()
    tags: set[int] = set()
    for fl in fields:
        if not _NAME.match(fl.name):
            raise ValueError(f"{owner}: field name {fl.name!r} must be snake_case")
        if fl.name in seen:
            raise ValueError(f"{owner}: duplicate field {fl.name!r}")
        seen.add(fl.name)
        if fl.tag is not None:
            if fl.tag in tags:
                raise ValueError(f"{owner}: duplicate tag {fl.tag}")
            tags.add(fl.tag)
        if isinstance(fl.type, Struct):
            _check_fields(f"{owner}.{fl.type.name}", fl.type.fields)
