"""Routing by API key: frame -> header -> decoded body -> handler, with Kafka's answers to bad input.

Unknown API keys, unsupported versions (other than ApiVersions) and bodies that do not decode
close the connection, as Kafka does; ApiVersions at an unknown version gets the KIP-511 answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from broker.network.reply import Reply
from broker.observability import logs
from broker.observability.metrics import METRICS
from protocol.codec import codec_for
from protocol.errors import DecodeError, ErrorCode
from protocol.frames import RequestHeader, parse_request_header, peek_header
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.schema import Data, Message

if TYPE_CHECKING:
    from protocol.schema import MessageData

# The decoded body of a request; ``Request[JoinGroupRequest]`` in a handler's signature.
Body = TypeVar("Body", bound=Data)
# A request message as ``register`` takes it (a string bound: ``MessageData`` is for type checkers).
RequestMessage = TypeVar("RequestMessage", bound="MessageData")


@dataclass(slots=True)
class ConnectionInfo:
    conn_id: int
    client_host: str
    client_port: int


@dataclass(slots=True)
class Request(Generic[Body]):
    header: RequestHeader
    body: Body
    conn: ConnectionInfo
    reply: Reply
    received: float

    @property
    def version(self) -> int:
        return self.header.api_version


Handler = Callable[[Request[Any]], None]


@dataclass
class Api:
    key: int
    request: Message
    response: Message
    min_version: int
    max_version: int
    handler: Handler
    name: str
    # Metric children, made on first use so only APIs and versions that were called show up.
    counters: dict[int, Any] = field(default_factory=dict)
    latency: Any = None

    def count(self, version: int) -> None:
        counter = self.counters.get(version)
        if counter is None:
            counter = self.counters[version] = METRICS.requests.labels(self.name, str(version))
        counter.inc()

    def latency_observer(self) -> Any:
        if self.latency is None:
            self.latency = METRICS.request_seconds.labels(self.name)
        return self.latency


class CloseConnection(Exception):
    """The request cannot be answered: close this one connection (and log it once)."""


class Router:
    def __init__(self) -> None:
        self.apis: dict[int, Api] = {}
        # Called once a connection has dispatched every frame one read carried (see after_frames).
        self.frames_done_hooks: list[Callable[[], None]] = []

    def register(self, request: type[RequestMessage], response: Message,
                 handler: Callable[[Request[RequestMessage]], None],
                 versions: tuple[int, int] | None = None) -> None:
        """Serves ``request`` (its versions, or ``versions``) with ``handler``, which is typed for
        that request's body."""
        assert request.api_key is not None
        lo, hi = versions or (request.valid.low, request.valid.high)
        name = ApiKey(request.api_key).name
        self.apis[request.api_key] = Api(request.api_key, request, response, lo, hi, handler, name)

    def advertised(self) -> list[tuple[int, int, int]]:
        return sorted((a.key, a.min_version, a.max_version) for a in self.apis.values())

    def dispatch(self, frame: bytes | memoryview, conn: ConnectionInfo) -> Reply:
        """Decodes one request frame and hands it to its handler; raises CloseConnection. The
        frame is only read during this call: nothing decoded from it refers back to it."""
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError as exc:
            raise CloseConnection(str(exc)) from None
        api = self.apis.get(api_key)
        if api is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if api_key == ApiKey.ApiVersions and version > api.max_version:
            return self._api_versions_fallback(correlation_id, api)
        if not api.min_version <= version <= api.max_version:
            raise CloseConnection(f"unsupported version {version} of {api.name} "
                                  f"(supported {api.min_version}-{api.max_version})")
        flexible = api.request.is_flexible(version)
        try:
            header, pos = parse_request_header(frame, flexible)
            body = codec_for(api.request, version).decode_from(frame, pos)[0]
        except DecodeError as exc:
            raise CloseConnection(f"{api.name} v{version}: {exc.reason}") from None
        # ApiVersions responses always use header v0 (KIP-511).
        flexible_header = api.response.is_flexible(version) and api_key != ApiKey.ApiVersions
        received = time.perf_counter()
        reply = Reply(api.response, version, correlation_id, flexible_header, received, api.latency_observer())
        request = Request(header, body, conn, reply, received)
        api.count(version)
        try:
            api.handler(request)
        except CloseConnection:
            raise
        except Exception:
            logs.event("handler.failed", 40, exc_info=True, api=api.name, version=version,
                       client_id=header.client_id, conn=conn.conn_id)
            raise CloseConnection(f"{api.name} v{version}: internal error") from None
        return reply

    def after_frames(self) -> None:
        """A connection has dispatched all the requests it had: handlers that queued writes
        start them now, so pipelined requests that arrived together share one write."""
        for hook in self.frames_done_hooks:
            hook()

    def _api_versions_fallback(self, correlation_id: int, api: Api) -> Reply:
        """KIP-511: a v0 body with UNSUPPORTED_VERSION and only the ApiVersions entry."""
        reply = Reply(api.response, 0, correlation_id, False)
        reply.set(ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=api.key, min_version=api.min_version,
                                                     max_version=api.max_version)],
        ))
        return reply
