"""The broker's front: one root nursery holding the listeners and the services that serve them
(built and started by ``broker.app``: the metrics endpoint, the log runtime, the shards' loaders
and timers, ...); one task per client connection."""

from __future__ import annotations

import errno
import itertools
import os
import resource
import signal
import socket
import time
from collections.abc import Callable

import trio

from broker import heap
from broker.app import BrokerApp
from broker.configs.node_config import BrokerConfig
from broker.network.connection import Connection
from broker.network.connection_limits import EveryInterval, address_key
from broker.network.readiness import ReadinessHub
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo
from broker.network.send_process import SendProcess
from broker.network.tls_connection import TlsConnection
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.runtime.timers import wall_ms
from broker.security.listeners import ListenerSpec
from broker.security.sasl import SaslState
from protocol.errors import ErrorCode
from storage.log_manager import LogOpener
from storage.partition_log import PartitionLog

# Connections accepted per wake-up of the accept loop before other tasks get a turn.
_ACCEPTS_PER_TURN = 256
# A broker kept at its connection limit, or an address turned away, is said to be so at most this often.
_LIMIT_LOG_INTERVAL_S = 60.0
# Addresses whose last rejection line is remembered for that.
_REJECTIONS_REMEMBERED = 10_000
# Accept failures that mean "out of descriptors or memory for now": wait and try again.
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


def raise_open_files_limit() -> int:
    """Every client connection holds a descriptor, and a soft limit of 1024 (a common default)
    would turn away the thousand-and-first consumer. The hard limit is what the administrator
    allows, so the soft one is raised to it. Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # e.g. above the kernel's nr_open: keep what we have
    return soft


class Broker:
    """Listens and accepts: one task per client connection, whose requests go to the router of
    the broker's services (``broker.app.BrokerApp``, which builds and starts them)."""

    def __init__(self, config: BrokerConfig, *, log_opener: LogOpener = PartitionLog.open,
                 clock: Callable[[], int] = wall_ms) -> None:
        """``log_opener`` and ``clock`` go to the services (see ``BrokerApp``)."""
        self.config = config
        self.app = app = BrokerApp(config, log_opener=log_opener, clock=clock)
        self.router = app.router
        self.security = app.security
        self.view = app.view
        self.bound_ports: dict[str, int] = {}
        self._conn_ids = itertools.count(1)
        self._max_request_bytes = config.get_int("socket.request.max.bytes")
        self.connection_counter = app.connection_counter
        # The connection limit reached (key "") and each address turned away, logged sparingly.
        self._limit_logs = EveryInterval(_LIMIT_LOG_INTERVAL_S, _REJECTIONS_REMEMBERED)
        self.readiness = ReadinessHub(after_round=self.router.after_frames, before_round=self.router.before_frames)
        self.bound_port: int | None = None
        # Writes the answers of busy readiness rounds on another core (started with serving).
        self.sender: SendProcess | None = None
        # The cancel scope of every client connection's task, to close them all at once.
        self._connections: set[trio.CancelScope] = set()
        if app.cluster is not None:
            app.cluster.on_lost_everything.append(self.close_client_connections)

    def close_client_connections(self, reason: str) -> None:
        """Closes every client connection now, unanswered requests and all: this node has just
        dropped every partition it owned (its lease expired or could not be renewed in time, e.g.
        after a pause), so whatever its clients asked or are about to ask of them would be answered
        NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR, after a backlog of requests queued while it was
        stopped. Disconnected, clients fail their in-flight requests at once, refresh their metadata
        (from any node) and go to the new owners; Kafka's clients and librdkafka do so on a closed
        connection without waiting for a timeout."""
        if not self._connections:
            return
        logs.warn("connection.closing_all", reason=reason, connections=len(self._connections))
        for scope in list(self._connections):
            scope.cancel()

    def _on_response(self, reply: Reply) -> None:
        if reply.latency is not None:
            # Until the answer left: a sync thread that wrote it says when.
            reply.latency.observe((reply.sent_at or time.perf_counter()) - reply.received)
        if reply.error_code and reply.message is not None:
            api = reply.message.name.removesuffix("Response")
            try:
                name = ErrorCode(reply.error_code).name
            except ValueError:
                name = str(reply.error_code)
            METRICS.request_errors.labels(api, name).inc()

    async def _handle_connection(self, stream: trio.SocketStream, spec: ListenerSpec | None = None) -> None:
        try:
            peer = stream.socket.getpeername()
        except OSError:
            peer = ("?", 0)
        info = ConnectionInfo(next(self._conn_ids), str(peer[0]), int(peer[1]))
        throttle_ms = self.app.enforcer.connection_throttle_ms(info.client_host)
        if throttle_ms > 0:
            # Over its address's connection_creation_rate: held, then closed unserved (Kafka's
            # connection quotas).
            logs.debug("quota.connection_throttled", client=info.client_host, throttle_ms=throttle_ms)
            await trio.sleep(throttle_ms / 1000)
            return
        max_bytes = self._max_request_bytes
        if spec is not None:
            info.listener = spec.name
            if spec.sasl:
                info.authenticated = False
                info.gated = True
                info.sasl = SaslState()
        METRICS.connections.inc()
        METRICS.connections_opened.inc()
        try:
            conn: Connection
            if spec is not None and spec.tls and self.security.ssl_context is not None:
                tls_stream = trio.SSLStream(stream, self.security.ssl_context, server_side=True)
                conn = TlsConnection(stream, tls_stream, self.router, info, max_bytes,
                                     self.security.handshake_timeout, self._on_response,
                                     self.security.max_unauthenticated_bytes, self.security.principal_mapper)
            else:
                conn = Connection(stream, self.router, info, max_bytes, self._on_response, self.readiness,
                                  self.security.max_unauthenticated_bytes)
            await conn.run()
        finally:
            METRICS.connections.dec()

    async def _accept_forever(self, listener: trio.SocketListener, nursery: trio.Nursery,
                              spec: ListenerSpec | None = None) -> None:
        """Accepts every connection that is waiting, then waits for more. trio's own accept loop
        takes one connection per pass of the scheduler; with thousands of busy connections that
        let in ~140 a second, so 10,000 consumers reconnecting (after a restart) queued for over a
        minute in the listen backlog, their requests unread and their sessions running out."""
        # A second descriptor for the same listening socket, read without trio's wrapper.
        sock = socket.socket(fileno=os.dup(listener.socket.fileno()))
        sock.setblocking(False)
        try:
            async with listener:
                counter = self.connection_counter
                while True:
                    if counter.full():
                        await self._wait_for_slot(spec)
                    await trio.lowlevel.wait_readable(sock)
                    for _ in range(_ACCEPTS_PER_TURN):
                        if counter.full():
                            break
                        try:
                            conn, address = sock.accept()
                        except BlockingIOError:
                            break
                        except OSError as exc:
                            if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                                raise
                            logs.warn("connection.accept_failed", error=errno.errorcode[exc.errno])
                            await trio.sleep(0.1)
                            break
                        host = address_key(str(address[0]))
                        if not counter.admit(host):
                            self._reject(conn, host, spec)
                            continue
                        stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
                        nursery.start_soon(self._run_connection, stream, host, spec)
        finally:
            sock.close()

    async def _wait_for_slot(self, spec: ListenerSpec | None) -> None:
        """The broker holds all the connections it may: accept nothing (new connections wait in the
        listen backlog, as with Kafka's acceptor) until one closes. Logged at most once a minute
        (a broker kept at its limit reaches it again with every connection that closes)."""
        counter = self.connection_counter
        if times := self._limit_logs.due("", trio.current_time()):
            by = "max.connections" if counter.cap == counter.limits.max_connections else "open_files_limit"
            logs.warn("connection.limit_reached", held=counter.total, limit=counter.cap, by=by,
                      listener=spec.name if spec else "PLAINTEXT", times=times)
        await counter.wait_for_slot()

    def _reject(self, conn: socket.socket, host: str, spec: ListenerSpec | None) -> None:
        """Its address holds max.connections.per.ip (or its override): closed at once, as Kafka
        closes it (the client sees a disconnection and retries after its backoff). Logged at most
        once a minute per address: a client retrying in a loop would otherwise write a line every
        backoff."""
        conn.close()
        METRICS.connections_rejected.inc()
        if times := self._limit_logs.due(host, trio.current_time()):
            logs.event("connection.rejected", reason="max.connections.per.ip", client=host,
                       listener=spec.name if spec else "PLAINTEXT", times=times)

    async def _run_connection(self, stream: trio.SocketStream, host: str, spec: ListenerSpec | None = None) -> None:
        scope = trio.CancelScope()
        self._connections.add(scope)
        try:
            with scope:
                await self._handle_connection(stream, spec)
        except Exception:
            # A connection's failure ends that connection, never the broker: its task runs in the
            # server's nursery, where an escaping error would cancel every other client.
            logs.event("connection.failed", 40, exc_info=True, listener=spec.name if spec else "PLAINTEXT")
        finally:
            self._connections.discard(scope)
            try:
                await trio.aclose_forcefully(stream)
            finally:
                # Its descriptor is closed: the slot may go to a waiting connection.
                self.connection_counter.release(host)

    async def _open_listeners(self) -> list[tuple[ListenerSpec, list[trio.SocketListener]]]:
        opened: list[tuple[ListenerSpec, list[trio.SocketListener]]] = []
        for spec in self.config.listeners:
            try:
                opened.append((spec, await trio.open_tcp_listeners(spec.port, host=spec.host)))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise SystemExit(f"kcoord: cannot listen on {spec.host}:{spec.port} ({spec.name}): "
                                     "address in use") from None
                raise
            port = opened[-1][1][0].socket.getsockname()[1]
            self.bound_ports[spec.name] = port
            by_listener = self.view.advertised_by_listener
            host, advertised_port = by_listener[spec.name]
            if spec.port == 0 and advertised_port == 0:
                by_listener[spec.name] = (host, port)
        return opened

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        open_files = raise_open_files_limit()
        self.connection_counter.keep_descriptors(open_files)
        METRICS.connections_max.set(self.connection_counter.cap)
        opened = await self._open_listeners()
        heap.configure()
        try:
            await self._serve(opened, open_files, task_status)
        finally:
            if self.sender is not None:
                self.readiness.sender = None
                self.sender.stop()

    async def _serve(self, opened: list[tuple[ListenerSpec, list[trio.SocketListener]]], open_files: int,
                     task_status: trio.TaskStatus[int]) -> None:
        listener = self.config.listener
        app = self.app
        view = self.view
        async with trio.open_nursery() as nursery:
            self.bound_port = opened[0][1][0].socket.getsockname()[1]
            if listener.port == 0 and view.advertised[1] == 0:
                view.advertised = (view.advertised[0], self.bound_port)
            await app.start(nursery)
            logs.event("broker.started", host=listener.host, port=self.bound_port, node_id=app.node_id,
                       cluster_id=app.cluster_id, data_dir=str(app.data_dir.resolve()),
                       metrics_port=app.metrics_port, console_port=app.console_port,
                       open_files_limit=open_files,
                       listeners=",".join(f"{spec.name}:{spec.protocol}:{self.bound_ports[spec.name]}"
                                          for spec, _ in opened))
            if self.readiness.available:
                min_round = self.config.get_int("socket.send.worker.min.round")
                if min_round > 0:
                    self.sender = SendProcess(min_round, on_lost=self.close_client_connections)
                    self.readiness.sender = self.sender
                    nursery.start_soon(self.sender.run)
                nursery.start_soon(self.readiness.run)
            for spec, tcp_listeners in opened:
                for tcp_listener in tcp_listeners:
                    nursery.start_soon(self._accept_forever, tcp_listener, nursery, spec)
            task_status.started(self.bound_port)

    async def stop_serving(self) -> None:
        """Controlled shutdown of a cluster node: hand every partition over now."""
        await self.app.stop_serving()

    async def close(self) -> None:
        """Flushes and closes everything the broker opened (called after serving stops)."""
        self.app.close()


async def run_until_signalled(broker: Broker) -> None:
    """Serves until SIGTERM/SIGINT, then stops gracefully: in-flight writes are flushed first."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.serve)
            async for signum in signals:
                logs.event("broker.stopping", signal=signal.Signals(signum).name)
                await broker.stop_serving()
                nursery.cancel_scope.cancel()
                break
    await broker.close()
    logs.event("broker.stopped", pid=os.getpid())
