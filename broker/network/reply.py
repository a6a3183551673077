"""Response slots. Every request gets one when it arrives; the connection sends slots strictly in
arrival order, each as soon as it and all before it are filled (pipelining with ordered replies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from protocol.codec import encode
from protocol.frames import frame_response
from protocol.schema import Data, Message


def first_error_code(obj: Data) -> int:
    """The first non-zero ``error_code`` nested in ``obj``, depth first (0 if none): the error of a
    response whose API has no top-level code (OffsetCommit, Produce, Metadata, ...)."""
    for name in obj._error_fields:
        value = getattr(obj, name)
        if name == "error_code":
            if value:
                return int(value)
        elif isinstance(value, list):
            for item in value:
                code = first_error_code(item)
                if code:
                    return code
        elif value is not None:
            code = first_error_code(value)
            if code:
                return code
    return 0


class LatencyObserver(Protocol):
    def observe(self, amount: float) -> None: ...


class Reply:
    __slots__ = ("on_ready", "close", "data", "flexible_header", "correlation_id", "error_code", "message", "version",
                 "received", "latency", "amend", "request_bytes")

    def __init__(self, message: Message | None, version: int, correlation_id: int, flexible_header: bool,
                 received: float = 0.0, latency: LatencyObserver | None = None) -> None:
        self.message = message
        self.version = version
        self.correlation_id = correlation_id
        self.flexible_header = flexible_header
        # When the request arrived (perf_counter) and where its latency goes once the reply is sent.
        self.received = received
        self.latency = latency
        self.data: bytes | None = None
        # The size of the request's frame, while the connection counts it as in flight.
        self.request_bytes = 0
        self.close = False
        self.error_code = 0
        # Set by the connection that owns this slot: told when the slot fills, so a reply whose
        # turn it is can be written on the spot by whoever filled it.
        self.on_ready: Callable[[], None] | None = None
        # Changes the handler's response before it is encoded: the authorizer adds back, with
        # their authorization errors, the parts of a request it kept from the handler.
        self.amend: Callable[[Data], Data] | None = None

    @property
    def ready(self) -> bool:
        return self.data is not None or self.close

    def set(self, response: Data) -> None:
        """Encodes ``response`` for this slot's version and wakes the writer."""
        if self.ready:
            return
        assert self.message is not None
        if self.amend is not None:
            response = self.amend(response)
        # A field check, not getattr: a missing attribute on a message object is an AttributeError
        # built (and formatted) only to be thrown away. Only some messages have a top-level
        # ``error_code``, so the type checker cannot see it on ``Data``.
        unchecked: Any = response
        code = unchecked.error_code if "error_code" in response._fields else first_error_code(response)
        self.error_code = code or 0
        self.data = frame_response(self.correlation_id, encode(self.message, response, self.version),
                                   self.flexible_header)
        self._wake()

    def set_bytes(self, body: bytes) -> None:
        if not self.ready:
            self.data = frame_response(self.correlation_id, body, self.flexible_header)
            self._wake()

    def set_raw(self, token: bytes) -> None:
        """A bare SASL token after SaslHandshake v0: size-prefixed, no response header."""
        if not self.ready:
            self.data = len(token).to_bytes(4, "big") + token
            self._wake()

    def set_nothing(self) -> None:
        """Produce with acks=0: the request is answered by no response at all."""
        if not self.ready:
            self.data = b""
            self._wake()

    def set_close(self) -> None:
        if not self.ready:
            self.close = True
            self._wake()

    def _wake(self) -> None:
        if self.on_ready is not None:
            self.on_ready()
