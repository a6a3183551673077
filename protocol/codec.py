"""Fast per-version codecs derived from the message tables.

For each (message, version) we generate Python source for a decoder and an encoder that use
``struct`` directly (consecutive fixed-width fields are packed and unpacked with one call), then
``exec`` it once. The construct declaration of the same table lives in ``reference`` and the two
are cross-tested; this one serves the request path.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from protocol.errors import DecodeError, EncodeError
from protocol.schema import ArrayOf, Data, Field, Message, Primitive, Struct
from protocol.varint import encode_uvarint, read_uvarint

Decoder = Callable[[bytes, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray], None]

_FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
_UV1 = [bytes((i,)) for i in range(128)]


class _Short(Exception):
    """Raised by generated decoders when a length points past the end of the buffer."""


def _is_fixed(fl: Field) -> bool:
    return isinstance(fl.type, Primitive) and fl.type.name in _FIXED


class _Gen:
    """Emits the source of the decoders and encoders of one message version."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "unpack_from": struct.unpack_from,
            "pack": struct.pack,
            "read_uvarint": read_uvarint,
            "encode_uvarint": encode_uvarint,
            "_Short": _Short,
            "_UV1": _UV1,
            "new": object.__new__,
        }
        self.counter = 0
        self.struct_funcs: dict[int, tuple[str, str]] = {}

    def tmp(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any) -> str:
        name = self.tmp("K")
        self.env[name] = value
        return name

    # ---- decoding -------------------------------------------------------------------------

    def uvarint_into(self, out: list[str], ind: str, var: str) -> None:
        out.append(f"{ind}{var} = buf[pos]")
        out.append(f"{ind}if {var} < 128: pos += 1")
        out.append(f"{ind}else: {var}, pos = read_uvarint(buf, pos)")

    def dec_length(self, out: list[str], ind: str, var: str, width: str) -> None:
        """Reads a length prefix into ``var``; -1 means null in every encoding."""
        if self.flexible:
            self.uvarint_into(out, ind, var)
            out.append(f"{ind}{var} -= 1")
        else:
            size = {"h": 2, "i": 4}[width]
            out.append(f"{ind}({var},) = unpack_from('>{width}', buf, pos); pos += {size}")

    def dec_value(self, out: list[str], ind: str, typ: Any, target: str, nullable: bool, what: str,
                  tagged: bool = False) -> None:
        if isinstance(typ, Primitive):
            if typ.name in _FIXED:
                fmt, size = _FIXED[typ.name]
                out.append(f"{ind}({target},) = unpack_from('>{fmt}', buf, pos); pos += {size}")
                return
            n = self.tmp("n")
            width = "h" if typ.name == "string" else "i"
            self.dec_length(out, ind, n, width)
            out.append(f"{ind}if {n} < 0:")
            if nullable:
                out.append(f"{ind}    {target} = None")
            else:
                out.append(f"{ind}    raise _Short('null {what} in a version where it is not nullable')")
            out.append(f"{ind}else:")
            out.append(f"{ind}    if pos + {n} > blen: raise _Short('{what} runs past the end')")
            if typ.name == "string":
                # str()/bytes() rather than .decode()/a bare slice so that a large request can be
                # decoded straight from a memoryview of the buffer it was read into.
                out.append(f"{ind}    {target} = str(buf[pos:pos + {n}], 'utf-8'); pos += {n}")
            else:
                out.append(f"{ind}    {target} = bytes(buf[pos:pos + {n}]); pos += {n}")
            return
        if isinstance(typ, Struct) and not typ.many:
            fn = self.struct_decoder(typ)
            if nullable:
                # Kafka writes a nullable struct as an int8 presence marker (-1 null, 1 present);
                # inside a tagged field as an unsigned varint (0 null, 1 present): Kafka 4.4 writes
                # ConsumerGroupMemberMetadataValue's null ClassicMemberMetadata as tag 0 holding 0x00.
                flag = self.tmp("p")
                out.append(f"{ind}({flag},) = unpack_from('>b', buf, pos); pos += 1")
                out.append(f"{ind}if {flag} {'<=' if tagged else '<'} 0: {target} = None")
                out.append(f"{ind}else: {target}, pos = {fn}(buf, pos, blen)")
            else:
                out.append(f"{ind}{target}, pos = {fn}(buf, pos, blen)")
            return
        # arrays
        n = self.tmp("n")
        self.dec_length(out, ind, n, "i")
        out.append(f"{ind}if {n} < 0:")
        if nullable:
            out.append(f"{ind}    {target} = None")
        else:
            out.append(f"{ind}    raise _Short('null array {what} in a version where it is not nullable')")
        out.append(f"{ind}else:")
        out.append(f"{ind}    if {n} > blen - pos: raise _Short('array {what} longer than the buffer')")
        item = typ.item if isinstance(typ, ArrayOf) else typ
        if isinstance(item, Primitive) and item.name in _FIXED and item.name != "uuid":
            fmt, size = _FIXED[item.name]
            out.append(f"{ind}    {target} = list(unpack_from('>%d{fmt}' % {n}, buf, pos)); pos += {size} * {n}")
            return
        lst = self.tmp("l")
        out.append(f"{ind}    {lst} = []")
        out.append(f"{ind}    for _ in range({n}):")
        elem = self.tmp("e")
        if isinstance(item, Struct):
            fn = self.struct_decoder(item)
            out.append(f"{ind}        {elem}, pos = {fn}(buf, pos, blen)")
        else:
            self.dec_value(out, ind + "        ", item, elem, False, what)
        out.append(f"{ind}        {lst}.append({elem})")
        out.append(f"{ind}    {target} = {lst}")

    def struct_body_decode(self, fields: list[Field], cls: type[Data], name: str) -> str:
        """Generates ``name(buf, pos, blen) -> (obj, pos)`` for one struct; returns the source."""
        v = self.version
        out = [f"def {name}(buf, pos, blen):", f"    o = new({self.const(cls)})"]
        present = [fl for fl in fields if v in fl.versions and fl.tag is None]
        tagged = [fl for fl in fields if v in fl.versions and fl.tag is not None and self.flexible]
        for fl in fields:
            if fl not in present:
                out.append(f"    o.{fl.name} = {self.default_expr(fl)}")
        i = 0
        while i < len(present):
            run = []
            while i < len(present) and _is_fixed(present[i]):
                run.append(present[i])
                i += 1
            if run:
                fmt = "".join(_FIXED[r.type.name][0] for r in run)  # type: ignore[union-attr]
                size = struct.calcsize(">" + fmt)
                targets = ", ".join(f"o.{r.name}" for r in run)
                out.append(f"    ({targets},) = unpack_from('>{fmt}', buf, pos); pos += {size}")
                continue
            fl = present[i]
            i += 1
            self.dec_value(out, "    ", fl.type, f"o.{fl.name}", v in fl.nullable, fl.name)
        if self.flexible:
            cnt = self.tmp("c")
            self.uvarint_into(out, "    ", cnt)
            out.append(f"    for _ in range({cnt}):")
            self.uvarint_into(out, "        ", "tag")
            self.uvarint_into(out, "        ", "size")
            out.append("        end = pos + size")
            out.append("        if end > blen: raise _Short('tagged field runs past the end')")
            for fl in tagged:
                out.append(f"        if tag == {fl.tag}:")
                self.dec_value(out, "            ", fl.type, f"o.{fl.name}", v in fl.nullable, fl.name, tagged=True)
            out.append("        pos = end")
        out.append("    return o, pos")
        return "\n".join(out)

    def default_expr(self, fl: Field) -> str:
        d = fl.default_value()
        if isinstance(d, list):
            return "[]"
        if d is None or isinstance(d, (bool, int, float)):
            return repr(d)
        return self.const(d)

    def struct_decoder(self, st: Struct) -> str:
        key = id(st)
        if key not in self.struct_funcs:
            name = self.tmp("dec_")
            self.struct_funcs[key] = (name, "")
            assert st.cls is not None
            src = self.struct_body_decode(st.fields, st.cls, name)
            self.lines.append(src)
        return self.struct_funcs[key][0]

    # ---- encoding -------------------------------------------------------------------------

    def enc_length(self, out: list[str], ind: str, expr: str, width: str) -> None:
        if self.flexible:
            out.append(f"{ind}_n = {expr} + 1")
            out.append(f"{ind}out += _UV1[_n] if _n < 128 else encode_uvarint(_n)")
        else:
            out.append(f"{ind}out += pack('>{width}', {expr})")

    def enc_value(self, out: list[str], ind: str, typ: Any, src: str, nullable: bool, what: str,
                  tagged: bool = False) -> None:
        if isinstance(typ, Primitive):
            if typ.name in _FIXED:
                fmt, _ = _FIXED[typ.name]
                out.append(f"{ind}out += pack('>{fmt}', {src})")
                return
            width = "h" if typ.name == "string" else "i"
            val = self.tmp("v")
            out.append(f"{ind}{val} = {src}")
            out.append(f"{ind}if {val} is None:")
            if nullable:
                self.enc_length(out, ind + "    ", "-1", width)
            else:
                out.append(f"{ind}    raise EncodeError('{what} is null in a version where it is not nullable')")
            out.append(f"{ind}else:")
            if typ.name == "string":
                out.append(f"{ind}    {val} = {val}.encode()")
            self.enc_length(out, ind + "    ", f"len({val})", width)
            out.append(f"{ind}    out += {val}")
            return
        if isinstance(typ, Struct) and not typ.many:
            fn = self.struct_encoder(typ)
            val = self.tmp("v")
            out.append(f"{ind}{val} = {src}")
            if nullable:
                null = "\\x00" if tagged else "\\xff"  # the presence markers dec_value reads
                out.append(f"{ind}if {val} is None: out += b'{null}'")
                out.append(f"{ind}else:")
                out.append(f"{ind}    out += b'\\x01'")
                out.append(f"{ind}    {fn}({val}, out)")
            else:
                out.append(f"{ind}{fn}({val}, out)")
            return
        val = self.tmp("v")
        out.append(f"{ind}{val} = {src}")
        out.append(f"{ind}if {val} is None:")
        if nullable:
            self.enc_length(out, ind + "    ", "-1", "i")
        else:
            out.append(f"{ind}    raise EncodeError('array {what} is null in a version where it is not nullable')")
        out.append(f"{ind}else:")
        self.enc_length(out, ind + "    ", f"len({val})", "i")
        item = typ.item if isinstance(typ, ArrayOf) else typ
        if isinstance(item, Primitive) and item.name in _FIXED and item.name != "uuid":
            fmt, _ = _FIXED[item.name]
            out.append(f"{ind}    out += pack('>%d{fmt}' % len({val}), *{val})")
            return
        elem = self.tmp("e")
        out.append(f"{ind}    for {elem} in {val}:")
        if isinstance(item, Struct):
            out.append(f"{ind}        {self.struct_encoder(item)}({elem}, out)")
        else:
            self.enc_value(out, ind + "        ", item, elem, False, what)

    def struct_body_encode(self, fields: list[Field], name: str) -> str:
        v = self.version
        out = [f"def {name}(o, out):"]
        present = [fl for fl in fields if v in fl.versions and fl.tag is None]
        tagged = [fl for fl in fields if v in fl.versions and fl.tag is not None and self.flexible]
        i = 0
        while i < len(present):
            run = []
            while i < len(present) and _is_fixed(present[i]):
                run.append(present[i])
                i += 1
            if run:
                fmt = "".join(_FIXED[r.type.name][0] for r in run)  # type: ignore[union-attr]
                args = ", ".join(f"o.{r.name}" for r in run)
                out.append(f"    out += pack('>{fmt}', {args})")
                continue
            fl = present[i]
            i += 1
            self.enc_value(out, "    ", fl.type, f"o.{fl.name}", v in fl.nullable, fl.name)
        if self.flexible:
            if not tagged:
                out.append("    out += b'\\x00'")
            else:
                out.append("    tags = []")
                for fl in sorted(tagged, key=lambda x: x.tag or 0):
                    dflt = self.const(fl.default_value())
                    out.append(f"    if o.{fl.name} != {dflt}:")
                    out.append("        outer = out; out = bytearray()")
                    self.enc_value(out, "        ", fl.type, f"o.{fl.name}", v in fl.nullable, fl.name, tagged=True)
                    out.append(f"        tags.append(({fl.tag}, out)); out = outer")
                out.append("    out += encode_uvarint(len(tags))")
                out.append("    for tag, data in tags:")
                out.append("        out += encode_uvarint(tag); out += encode_uvarint(len(data)); out += data")
        if len(out) == 1:
            out.append("    pass")
        return "\n".join(out)

    def struct_encoder(self, st: Struct) -> str:
        key = -id(st)
        if key not in self.struct_funcs:
            name = self.tmp("enc_")
            self.struct_funcs[key] = (name, "")
            self.lines.append(self.struct_body_encode(st.fields, name))
        return self.struct_funcs[key][0]

    def build(self) -> dict[str, Any]:
        self.env["EncodeError"] = EncodeError
        ns = dict(self.env)
        exec(compile("\n\n".join(self.lines), "<kafka-codec>", "exec"), ns)
        return ns


class MessageCodec:
    """The decoder and encoder of one message at one version."""

    __slots__ = ("_decode", "_encode", "message", "version")

    def __init__(self, message: Message, version: int) -> None:
        self.message = message
        self.version = version
        gen = _Gen(version, message.is_flexible(version))
        dec_src = gen.struct_body_decode(message.fields, message.cls, "decode_top")
        enc_src = gen.struct_body_encode(message.fields, "encode_top")
        gen.lines.extend([dec_src, enc_src])
        ns = gen.build()
        self._decode: Callable[[bytes | memoryview, int, int], tuple[Any, int]] = ns["decode_top"]
        self._encode: Encoder = ns["encode_top"]

    def decode_from(self, buf: bytes | memoryview, pos: int = 0) -> tuple[Any, int]:
        try:
            return self._decode(buf, pos, len(buf))
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, _Short) as exc:
            raise DecodeError(self.message.name, self.version, str(exc) or type(exc).__name__,
                              self.message.api_key) from None

    def encode_into(self, obj: Any, out: bytearray) -> None:
        try:
            self._encode(obj, out)
        except EncodeError:
            raise
        except (struct.error, AttributeError, TypeError, UnicodeEncodeError) as exc:
            raise EncodeError(f"cannot encode {self.message.name} v{self.version}: {exc}") from None


_CODECS: dict[tuple[int, int], MessageCodec] = {}


def codec_for(message: Message, version: int) -> MessageCodec:
    key = (id(message), version)
    codec = _CODECS.get(key)
    if codec is None:
        if version not in message.valid:
            raise DecodeError(message.name, version, "unsupported version", message.api_key)
        codec = _CODECS[key] = MessageCodec(message, version)
    return codec


def decode(message: Message, data: bytes, version: int) -> Any:
    if not isinstance(data, bytes):
        data = bytes(data)
    return codec_for(message, version).decode_from(data, 0)[0]


def encode(message: Message, obj: Any, version: int) -> bytes:
    out = bytearray()
    codec_for(message, version).encode_into(obj, out)
    return bytes(out)
