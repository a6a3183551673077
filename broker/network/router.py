"""Routing by API key: frame -> header -> decoded body -> handler, with Kafka's answers to bad input.

Unknown API keys, unsupported versions (other than ApiVersions) and bodies that do not decode
close the connection, as Kafka does; ApiVersions at an unknown version gets the KIP-511 answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from broker.network.reply import DirectSender, LatencyObserver, Reply
from broker.observability import logs
from broker.observability.metrics import METRICS
from protocol.codec import MessageCodec, codec_for
from protocol.errors import DecodeError, ErrorCode
from protocol.frames import parse_request_header, peek_header, response_header_flexible
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.schema import Data, Message

if TYPE_CHECKING:
    from broker.security.sasl import SaslState

# The decoded body of a request; ``Request[JoinGroupRequest]`` in a handler's signature.
Body = TypeVar("Body")


ANONYMOUS = "User:ANONYMOUS"
# Served to a connection that has not authenticated (or whose SASL session must be renewed).
_SASL_APIS = frozenset({ApiKey.ApiVersions, ApiKey.SaslHandshake, ApiKey.SaslAuthenticate})


@dataclass(slots=True)
class ConnectionInfo:
    conn_id: int
    client_host: str
    client_port: int
    # The listener the connection came in through, and who it is: User:ANONYMOUS on PLAINTEXT, the
    # certificate subject on SSL with a client certificate, the SASL user once authenticated.
    listener: str = "PLAINTEXT"
    principal: str = ANONYMOUS
    authenticated: bool = True
    # Requests pass the SASL gate first: the connection is a SASL one (broker/security/sasl.py).
    gated: bool = False
    sasl: SaslState | None = None
    # time.monotonic() after which only re-authentication is served (KIP-368); 0 = never.
    session_expires: float = 0.0
    # Authenticated with a delegation token: such a connection may not create, renew, expire or
    # describe tokens (Kafka's KafkaApis.allowTokenRequests).
    token_authenticated: bool = False
    # After SaslHandshake v0 the next frames are bare SASL tokens, not requests.
    raw_sasl: bool = False
    # A failed authentication: (delay in seconds, what answers it); the connection stops reading,
    # waits the delay, answers, and closes.
    failed_auth: tuple[float, Callable[[], None]] | None = None
    # Stops reading from the connection for this many seconds (a client throttled by a quota),
    # and with ``hold`` also sends no response until then (a client older than KIP-219); set by
    # the connection that serves it.
    mute: Callable[[float, bool], None] | None = None
    # What the client said it is in ApiVersions v3+ (client telemetry matches on it).
    software: tuple[str, str] = ("", "")
    # The connection, when a sync thread may write its replies to the socket (``Reply.lend``).
    sender: DirectSender | None = None


@dataclass(slots=True)
class Request(Generic[Body]):
    """One decoded request and its context: who sent it (principal, listener, client id and host, as
    they were when it arrived), the API version, and the reply slot its answer goes into."""

    body: Body
    reply: Reply
    api_key: int
    version: int
    client_id: str
    principal: str
    listener: str
    client_host: str
    # The connection itself: what the SASL exchange changes lives there.
    conn: ConnectionInfo


# What serves one API. The router passes each handler bodies of its own API only (decoded with its
# request's codec), so a handler typed for ``Request[JoinGroupRequest]`` is stored as this.
Handler = Callable[[Request[Data]], None]
# With the authorizer on: True when the request was answered (denied) and its handler must not run.
Authorize = Callable[[Request[Data]], bool]


class Counter(Protocol):
    def inc(self, amount: float = 1) -> None: ...


@dataclass
class Api:
    """What the router keeps of one API of the table (broker/apis.py)."""

    key: int
    request: Message
    response: Message
    min_version: int
    max_version: int
    handler: Handler
    name: str
    authorize: Authorize | None = None
    # Metric children, made on first use so only APIs and versions that were called show up.
    counters: dict[int, Counter] = field(default_factory=dict)
    latency: LatencyObserver | None = None

    def counter(self, version: int) -> Counter:
        counter = self.counters.get(version)
        if counter is None:
            counter = self.counters[version] = METRICS.requests.labels(self.name, str(version))
        return counter

    def latency_observer(self) -> LatencyObserver:
        if self.latency is None:
            self.latency = METRICS.request_seconds.labels(self.name)
        return self.latency


@dataclass(slots=True)
class Route:
    """What dispatching one API at one version needs, worked out on its first request rather
    than on every one."""

    api: Api
    handler: Handler
    authorize: Authorize | None
    decoder: MessageCodec
    flexible: bool
    flexible_header: bool
    counter: Counter
    latency: LatencyObserver


class CloseConnection(Exception):
    """The request cannot be answered: close this one connection (and log it once)."""


class Router:
    def __init__(self) -> None:
        self.apis: dict[int, Api] = {}
        # (api key << 16) | version -> Route, for the API versions clients have used.
        self.routes: dict[int, Route] = {}
        # Called once the requests read together have been dispatched (see after_frames), and
        # before a round of reads whose end will call them (see before_frames).
        self.frames_done_hooks: list[Callable[[], None]] = []
        self.frames_coming_hooks: list[Callable[[], None]] = []
        # Called once a client connection has closed, with its info (share sessions end with it).
        self.closed_hooks: list[Callable[[ConnectionInfo], None]] = []
        # A bare SASL token after SaslHandshake v0 (broker/handlers/sasl.py).
        self.raw_sasl_token: Callable[[bytes, ConnectionInfo], Reply] | None = None
        # Sees every request that reaches its handler, with its frame's size, before the handler
        # runs; what it returns is called when the handler returns (client quotas, broker/quotas/).
        self.observer: Callable[[Request[Data], int], Callable[[], None] | None] | None = None

    def install(self, apis: Iterable[Api]) -> None:
        """Serves these APIs (the table's, broker/apis.py), and no others."""
        self.apis = {}
        for api in apis:
            if api.key in self.apis:
                raise ValueError(f"{api.name} is served twice")
            self.apis[api.key] = api
        self.routes.clear()

    def advertised(self) -> list[tuple[int, int, int]]:
        return sorted((a.key, a.min_version, a.max_version) for a in self.apis.values())

    def dispatch(self, frame: bytes | memoryview, conn: ConnectionInfo) -> Reply:
        """Decodes one request frame and hands it to its handler; raises CloseConnection. The
        frame is only read during this call: nothing decoded from it refers back to it."""
        if conn.raw_sasl and self.raw_sasl_token is not None:
            return self.raw_sasl_token(bytes(frame), conn)
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError as exc:
            raise CloseConnection(str(exc)) from None
        if conn.gated and api_key not in _SASL_APIS:
            _check_session(conn, api_key)
        route = self.routes.get((api_key << 16) | (version & 0xFFFF))
        if route is None:
            if api_key == ApiKey.ApiVersions and (api := self.apis.get(api_key)) is not None \
                    and version > api.max_version:
                return self._api_versions_fallback(correlation_id, api)
            route = self._route(api_key, version)
        try:
            header, pos = parse_request_header(frame, route.flexible)
            body = route.decoder.decode_from(frame, pos)[0]
        except DecodeError as exc:
            raise CloseConnection(f"{route.api.name} v{version}: {exc.reason}") from None
        reply = Reply(route.api.response, version, correlation_id, route.flexible_header, time.perf_counter(),
                      route.latency, conn.sender)
        route.counter.inc()
        request = Request(body, reply, api_key, version, header.client_id, conn.principal, conn.listener,
                          conn.client_host, conn)
        authorize = route.authorize
        if authorize is not None and authorize(request):
            return reply
        observer = self.observer
        handled = None if observer is None else observer(request, len(frame))
        try:
            route.handler(request)
            if handled is not None:
                handled()
        except CloseConnection:
            raise
        except Exception:
            logs.event("handler.failed", 40, exc_info=True, api=route.api.name, version=version,
                       client_id=header.client_id, conn=conn.conn_id)
            raise CloseConnection(f"{route.api.name} v{version}: internal error") from None
        return reply

    def _route(self, api_key: int, version: int) -> Route:
        """Checks an API version not seen yet (raising CloseConnection as Kafka would close) and
        keeps what dispatching it needs."""
        api = self.apis.get(api_key)
        if api is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if not api.min_version <= version <= api.max_version:
            raise CloseConnection(f"unsupported version {version} of {api.name} "
                                  f"(supported {api.min_version}-{api.max_version})")
        route = Route(
            api=api, handler=api.handler, authorize=api.authorize, decoder=codec_for(api.request, version),
            flexible=api.request.is_flexible(version),
            flexible_header=response_header_flexible(api_key, api.response.is_flexible(version)),
            counter=api.counter(version), latency=api.latency_observer())
        self.routes[(api_key << 16) | (version & 0xFFFF)] = route
        return route

    def connection_closed(self, info: ConnectionInfo) -> None:
        for hook in self.closed_hooks:
            hook(info)

    def before_frames(self) -> None:
        """Connections are about to dispatch what they read, and ``after_frames`` will follow
        before anything is awaited."""
        for hook in self.frames_coming_hooks:
            hook()

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


def _check_session(conn: ConnectionInfo, api_key: int) -> None:
    """Kafka closes a connection that sends anything but ApiVersions and the SASL exchange before
    it has authenticated, or after its session expired without re-authentication."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        name = f"api key {api_key}"
    if not conn.authenticated:
        raise CloseConnection(f"{name} before SASL authentication")
    if conn.session_expires and time.monotonic() > conn.session_expires:
        raise CloseConnection(f"{name} after the SASL session expired (connections.max.reauth.ms)")
