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


def error_code_of(response: Data) -> int:
    """A response's error: its top-level ``error_code``, else the first one nested in it."""
    # A field check, not getattr: a missing attribute on a message object is an AttributeError
    # built (and formatted) only to be thrown away. Only some messages have a top-level
    # ``error_code``, so the type checker cannot see it on ``Data``.
    unchecked: Any = response
    code = unchecked.error_code if "error_code" in response._fields else first_error_code(response)
    return int(code or 0)


class LatencyObserver(Protocol):
    def observe(self, amount: float) -> None: ...


class DirectSender(Protocol):
    """The connection of a reply that a sync thread may send (``Reply.lend``)."""

    def alone(self, reply: Reply) -> bool:
        """Nothing but ``reply`` is owed on the connection (or will be, once it is queued)."""

    def lend(self, reply: Reply) -> int | None: ...

    def returned(self, reply: Reply, sent: int, durable: bool, sent_at: float = 0.0) -> None: ...


class Reply:
    __slots__ = ("on_ready", "close", "data", "flexible_header", "correlation_id", "error_code", "message", "version",
                 "received", "latency", "amend", "request_bytes", "sender", "prepared", "prepared_for", "sent_at")

    def __init__(self, message: Message | None, version: int, correlation_id: int, flexible_header: bool,
                 received: float = 0.0, latency: LatencyObserver | None = None,
                 sender: DirectSender | None = None) -> None:
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
        # The connection, when its socket may be written from another thread (not TLS): the sync
        # thread that makes this reply's records durable may then send it itself (``lend``).
        self.sender = sender
        # The encoded answer to ``prepared_for``, made when the operation ran, released by ``set``
        # with that same response or sent by a sync thread before.
        self.prepared: bytes | None = None
        self.prepared_for: Data | None = None
        # When a sync thread wrote it (perf_counter; 0: the connection wrote it when it was filled).
        self.sent_at = 0.0

    @property
    def ready(self) -> bool:
        return self.data is not None or self.close

    def set(self, response: Data) -> None:
        """Encodes ``response`` for this slot's version (unless ``prepare`` did) and wakes the
        writer."""
        if self.ready:
            return
        if response is self.prepared_for and self.prepared is not None:
            self.data = self.prepared
        else:
            self.data = self._encode(response)
        self._wake()

    def _encode(self, response: Data) -> bytes:
        assert self.message is not None
        if self.amend is not None:
            response = self.amend(response)
        self.error_code = error_code_of(response)
        return frame_response(self.correlation_id, encode(self.message, response, self.version), self.flexible_header)

    # ---- sent by the sync thread that makes the answer durable ----------------------------------

    def prepare(self, response: Data) -> bool:
        """Encodes ``response``, the answer once the operation's records are durable, now, without
        releasing it: the sync thread that makes them durable may then send it (``lend``). False
        when nobody but the connection's own writer may send it."""
        if self.sender is None or self.ready or not self.sender.alone(self):
            return False  # a pipelining client's replies leave together, from the event loop
        if self.amend is not None:
            # A quota charges the handler's time when the answer is encoded, once the handler has
            # returned; an authorizer's amendment is rare. Both answer through ``set``.
            return False
        self.prepared = self._encode(response)
        self.prepared_for = response
        return True

    def lend(self) -> tuple[int, bytes] | None:
        """The socket and the prepared bytes, when the pass that makes this answer durable may
        write them itself from its thread (this reply heads its connection's queue and nothing is
        being written): until ``returned`` nobody else writes to the connection."""
        if self.sender is None or self.prepared is None or self.ready:
            return None
        fd = self.sender.lend(self)
        return None if fd is None else (fd, self.prepared)

    def returned(self, sent: int, durable: bool, sent_at: float = 0.0) -> None:
        """The pass is over: ``sent`` bytes of the prepared answer were written (-1: the socket
        failed), after its records became durable (``durable``) or not at all; ``sent_at``: when
        (perf_counter), for the request's latency."""
        assert self.sender is not None
        self.sender.returned(self, sent, durable, sent_at)

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
