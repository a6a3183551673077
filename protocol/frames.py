"""Request and response headers, and the size-prefixed frame around them.

Request header v1 (non-flexible API versions) and v2 (flexible) differ only in the trailing
tagged-field block; ClientId is always an int16-length nullable string. Response header v0 is
the correlation id alone, v1 adds a tagged-field block — except that ApiVersions responses always
use v0 (KIP-511) so that a client can read the answer whatever version it asked for.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.errors import DecodeError
from protocol.varint import VarintError, read_uvarint

API_VERSIONS_KEY = 18
_HEADER = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_SIZE_CORR = struct.Struct(">ii")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame, or DecodeError if shorter than that."""
    if len(frame) < 8:
        raise DecodeError("RequestHeader", 0, "frame shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(frame: bytes | memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    """Parses the header (v2 when ``flexible`` else v1); returns it and the offset of the body."""
    try:
        api_key, api_version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        pos = _HEADER.size
        if n < 0:
            client_id = ""
        else:
            if pos + n > len(frame):
                raise DecodeError("RequestHeader", 2 if flexible else 1, "client id runs past the end", api_key)
            client_id = str(frame[pos : pos + n], "utf-8")
            pos += n
        if flexible:
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
            if pos > len(frame):
                raise DecodeError("RequestHeader", 2, "tagged fields run past the end", api_key)
    except (struct.error, VarintError, UnicodeDecodeError) as exc:
        raise DecodeError("RequestHeader", 2 if flexible else 1, str(exc)) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(header: RequestHeader, flexible: bool) -> bytes:
    client = header.client_id.encode()
    out = _HEADER.pack(header.api_key, header.api_version, header.correlation_id, len(client)) + client
    return out + b"\x00" if flexible else out


def frame_response(correlation_id: int, body: bytes, flexible_header: bool) -> bytes:
    """Size prefix + response header (v1 when ``flexible_header``) + body."""
    if flexible_header:
        return _SIZE_CORR.pack(len(body) + 5, correlation_id) + b"\x00" + body
    return _SIZE_CORR.pack(len(body) + 4, correlation_id) + body


def response_header_flexible(api_key: int, flexible: bool) -> bool:
    """Whether the response to a request of ``api_key`` at a version that is ``flexible`` has header v1
    (correlation id and a tagged-field block): every flexible API version but ApiVersions (KIP-511)."""
    return flexible and api_key != API_VERSIONS_KEY


def response_header_size(api_key: int, flexible: bool) -> int:
    """Bytes of a response header whose tagged-field block is empty (as kcoord sends it): where the
    body starts in a frame without its size prefix, for readers of pre-encoded answers."""
    return 5 if response_header_flexible(api_key, flexible) else 4


def parse_response_header(frame: bytes | memoryview, api_key: int, flexible: bool) -> tuple[int, int]:
    """(correlation_id, offset of the body) of a response frame without its size prefix, to a request
    of ``api_key`` at a version that is ``flexible``; a tagged-field block is skipped whatever it holds."""
    try:
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        pos = 4
        if response_header_flexible(api_key, flexible):
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
            if pos > len(frame):
                raise DecodeError("ResponseHeader", 1, "tagged fields run past the end", api_key)
    except (struct.error, VarintError) as exc:
        raise DecodeError("ResponseHeader", 1 if flexible else 0, str(exc), api_key) from None
    return correlation_id, pos


def frame_request(header: RequestHeader, body: bytes, flexible: bool) -> bytes:
    payload = encode_request_header(header, flexible) + body
    return _SIZE.pack(len(payload)) + payload


def read_size(prefix: bytes) -> int:
    return int(_SIZE.unpack(prefix)[0])
