"""A small trio-native client of etcd's v3 JSON gateway (``/v3/kv/*``, ``/v3/lease/*``).

etcd 3.4 serves its gRPC API as JSON over plain HTTP/1.1: keys and values are base64, 64-bit
numbers are strings. Speaking that directly keeps the client inside trio (no threads, no second
event loop) and needs no dependency: the maintained Python clients are either synchronous
(etcd3gw, on ``requests``) or gRPC-based with their own threads. One request per connection
(``Connection: close``): the node sends a handful of requests a second at most, and a fresh
connection never carries state from a request that timed out.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import trio


class EtcdError(Exception):
    """etcd could not be reached, or answered with an error."""


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def prefix_end(prefix: str) -> bytes:
    """The range end that covers every key starting with ``prefix`` (etcd's ``WithPrefix``)."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return b"\0"
    raw[-1] += 1
    return bytes(raw)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


def _kv(entry: dict[str, Any]) -> KeyValue:
    return KeyValue(unb64(entry["key"]).decode(), unb64(entry.get("value", "")), int(entry.get("create_revision", 0)),
                    int(entry.get("mod_revision", 0)), int(entry.get("lease", 0)))


def _decode_chunked(body: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while pos < len(body):
        line_end = body.index(b"\r\n", pos)
        size = int(body[pos:line_end].split(b";")[0], 16)
        if size == 0:
            break
        start = line_end + 2
        out += body[start:start + size]
        pos = start + size + 2
    return bytes(out)


class EtcdClient:
    def __init__(self, endpoints: str, timeout_s: float = 2.0) -> None:
        self.endpoints: list[tuple[str, int]] = []
        for url in (e.strip() for e in endpoints.split(",")):
            if url:
                parts = urlsplit(url if "://" in url else "http://" + url)
                self.endpoints.append((parts.hostname or "127.0.0.1", parts.port or 2379))
        if not self.endpoints:
            raise ValueError("etcd.endpoints names no endpoint")
        self.timeout_s = timeout_s
        self._current = 0

    async def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POSTs ``body`` to ``path``, trying each endpoint once, starting with the one that last worked."""
        errors = []
        for attempt in range(len(self.endpoints)):
            index = (self._current + attempt) % len(self.endpoints)
            try:
                with trio.fail_after(self.timeout_s):
                    answer = await self._post(self.endpoints[index], path, body)
            except (OSError, trio.TooSlowError, trio.BrokenResourceError, ValueError, IndexError, EtcdError) as exc:
                # BrokenResourceError: the connection was reset mid-answer (etcd restarting).
                errors.append(f"{self.endpoints[index][0]}:{self.endpoints[index][1]}: {exc!r}")
                continue
            self._current = index
            return answer
        raise EtcdError("; ".join(errors))

    async def _post(self, endpoint: tuple[str, int], path: str, body: dict[str, Any]) -> dict[str, Any]:
        host, port = endpoint
        payload = json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await stream.send_all(head + payload)
            received = bytearray()
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                received += chunk
        header_end = received.find(b"\r\n\r\n")
        if header_end < 0:
            raise EtcdError("truncated HTTP response")
        lines = bytes(received[:header_end]).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        content = bytes(received[header_end + 4:])
        if headers.get("transfer-encoding", "").lower() == "chunked":
            content = _decode_chunked(content)
        # A streaming call (lease keepalive) answers newline-separated messages; the first one counts.
        text = content.decode().strip().split("\n")[0] if content.strip() else "{}"
        answer: dict[str, Any] = json.loads(text)
        if status != 200 or "error" in answer:
            raise EtcdError(f"HTTP {status}: {text[:300]}")
        return answer.get("result", answer)

    # ---- leases -------------------------------------------------------------------------------

    async def grant(self, ttl_s: int) -> int:
        return int((await self.call("/v3/lease/grant", {"TTL": ttl_s}))["ID"])

    async def keepalive(self, lease: int) -> int:
        """Renews ``lease``; returns its new TTL in seconds, 0 when it has already expired."""
        return int((await self.call("/v3/lease/keepalive", {"ID": str(lease)})).get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        await self.call("/v3/lease/revoke", {"ID": str(lease)})

    # ---- keys ---------------------------------------------------------------------------------

    async def put(self, key: str, value: bytes | str, lease: int = 0) -> int:
        body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int((await self.call("/v3/kv/put", body))["header"]["revision"])

    async def get_prefix(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` and the store's revision they were read at."""
        answer = await self.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        return [_kv(e) for e in answer.get("kvs", [])], int(answer["header"]["revision"])

    async def create_if_absent(self, key: str, value: bytes | str, lease: int) -> int | None:
        """Puts ``key`` only if it does not exist; the revision that created it, or None."""
        answer = await self.call("/v3/kv/txn", {
            "compare": [{"key": b64(key), "target": "CREATE", "create_revision": "0", "result": "EQUAL"}],
            "success": [{"request_put": {"key": b64(key), "value": b64(value), "lease": str(lease)}}],
        })
        return int(answer["header"]["revision"]) if answer.get("succeeded") else None

    async def delete_if_revision(self, key: str, create_revision: int) -> bool:
        """Deletes ``key`` only if it is still the version created at ``create_revision``."""
        answer = await self.call("/v3/kv/txn", {
            "compare": [{"key": b64(key), "target": "CREATE", "create_revision": str(create_revision),
                         "result": "EQUAL"}],
            "success": [{"request_delete_range": {"key": b64(key)}}],
        })
        return bool(answer.get("succeeded"))

    async def apply(self, puts: dict[str, bytes | str], deletes: list[str]) -> int:
        """Puts and deletes ``deletes`` in one transaction (all or nothing); the store's revision after it."""
        ops: list[dict[str, Any]] = [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in puts.items()]
        ops += [{"request_delete_range": {"key": b64(k)}} for k in deletes]
        answer = await self.call("/v3/kv/txn", {"compare": [], "success": ops})
        return int(answer["header"]["revision"])
