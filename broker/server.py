"""The broker: one root nursery holding the listener, the metrics endpoint, the log runtime (writes,
flushes, retention and compaction of every partition), the shards' loaders and timers; one task
per client connection."""

from __future__ import annotations

import errno
import itertools
import os
import resource
import signal
import socket
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from broker import heap
from broker.cluster.etcd import EtcdClient
from broker.cluster.node import ClusterNode
from broker.config import BrokerConfig
from broker.coordinator.context import CoordinatorConfig
from broker.groups.journal_writer import JournalWriter
from broker.groups.shards import ShardManager
from broker.groups.timers import wall_ms
from broker.log_runtime.runtime import LogRuntime
from broker.network.connection import Connection
from broker.network.readiness import ReadinessHub
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Router
from broker.network.tls_connection import TlsConnection
from broker.observability import logs
from broker.observability.lag_metrics import LagMetrics
from broker.observability.metrics import METRICS, install_state_collector
from broker.observability.state_metrics import doctor_families, state_families
from broker.security.context import SecurityContext
from broker.security.listeners import ListenerSpec
from broker.security.sasl import SaslState
from broker.topics.catalog import (
    EVENTS_TOPIC,
    OFFSETS_TOPIC,
    Topic,
    TopicCatalog,
    TopicError,
    owning_partition,
)
from broker.topics.changes import PartitionsAdded, Settlement, TopicChanges, TopicCreated, TopicDeleted
from broker.transactions.markers import MarkerWriter
from broker.transactions.service import TransactionService
from broker.txn_coordinator.coordinator import TransactionCoordinator
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.dir_lock import DataDirError, DirLock, acquire, open_data_dir
from storage.fencing import Fence
from storage.log_manager import LogOpener
from storage.partition_log import PartitionLog


def _load_cluster_id(data_dir: Path, configured: str, node_id: int) -> str:
    """Kafka keeps node and cluster ids in meta.properties; a configured cluster.id must match it."""
    path = data_dir / "meta.properties"
    props: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                k, _, v = line.partition("=")
                props[k.strip()] = v.strip()
    existing = props.get("cluster.id")
    if existing and configured and existing != configured:
        raise SystemExit(f"cluster.id {configured!r} does not match {existing!r} in {path}")
    cluster_id = existing or configured or urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not existing:
        path.write_text(f"#\nversion=1\nnode.id={node_id}\ncluster.id={cluster_id}\n")
    return cluster_id


def _lock_data_dir(data_dir: Path, cluster_node: int | None) -> list[DirLock]:
    """A single node locks the directory for itself. The nodes of a cluster share it (a shared
    lock, which still keeps out a single-node broker or Kafka), and each locks a file named after
    its node id, so that two processes configured with the same node.id cannot both run on it.
    Which node writes which partition is then decided by ownership in etcd."""
    try:
        if cluster_node is None:
            return [open_data_dir(data_dir)]
        shared = open_data_dir(data_dir, shared=True)
        try:
            return [shared, acquire(data_dir, name=f".lock-node-{cluster_node}")]
        except DataDirError:
            shared.release()
            raise
    except DataDirError as exc:
        raise SystemExit(f"kcoord: log.dirs: {exc}") from None


# Connections accepted per wake-up of the accept loop before other tasks get a turn.
_ACCEPTS_PER_TURN = 256
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
    def __init__(self, config: BrokerConfig, *, log_opener: LogOpener = PartitionLog.open,
                 clock: Callable[[], int] = wall_ms) -> None:
        """``log_opener`` opens every partition log and ``clock`` is the coordinator's wall clock
        in ms; both are replaceable so that the whole shell can run in one process against logs
        and time that a test controls."""
        self.config = config
        self.log_opener = log_opener
        self.clock = clock
        self.node_id: int = config["node.id"]
        self.data_dir = config.data_dir
        clustered = bool(config["etcd.endpoints"].strip())
        # First, before meta.properties or any log is read or written: a second broker on this
        # directory must stop here, having changed nothing that the first one owns.
        self.dir_locks = _lock_data_dir(self.data_dir, self.node_id if clustered else None)
        self.cluster_id = _load_cluster_id(self.data_dir, config["cluster.id"], self.node_id)
        self.catalog = TopicCatalog(self.data_dir, config["offsets.topic.num.partitions"], shared=clustered)
        self.cluster: ClusterNode | None = None
        if clustered:
            prefix = config["etcd.prefix"].strip() or f"/kcoord/{self.cluster_id}"
            self.cluster = ClusterNode(EtcdClient(config["etcd.endpoints"]), prefix, self.node_id,
                                       config.advertised.host, config.advertised.port,
                                       config["broker.session.timeout.ms"], self._all_partitions)
        self.router = Router()
        self.security = SecurityContext(config, self.data_dir, None if self.cluster is None else (
            EtcdClient(config["etcd.endpoints"]), self.cluster.prefix))
        self.advertised = (config.advertised.host, config.advertised.port)
        # Each listener's address as given to clients that connected through it.
        self.advertised_by_listener = dict(config.advertised_by_listener)
        self.bound_ports: dict[str, int] = {}
        self._conn_ids = itertools.count(1)
        self._rebalance_started: dict[str, float] = {}
        self.logs = self._make_log_runtime()
        if self.cluster is not None:
            self.logs.may_write = self.cluster.may_write
            self.logs.fence_for = self._fence_for
        # One writer per log: in cluster mode the journal has a partition per __consumer_offsets
        # partition, written by the node that owns that shard (``ClusterListener``).
        self.journal = JournalWriter(self.logs, self.catalog, retention_ms=config["group.events.retention.ms"],
                                     segment_bytes=config["log.segment.bytes"], enabled=config["group.events.enable"],
                                     partitions=1 if self.cluster is None else config["offsets.topic.num.partitions"],
                                     clustered=self.cluster is not None)
        self.shards = self._make_shards()
        # Created, grown and deleted topics, as the group coordinator must follow them.
        self.topic_changes = TopicChanges()
        self.topic_changes.subscribe(self.shards.on_topic_change)
        self.router.frames_done_hooks.append(self.logs.kick)
        install_state_collector(lambda: itertools.chain(state_families(self.shards), doctor_families(self.journal)))
        self.readiness = ReadinessHub(after_round=self.router.after_frames)
        self.bound_port: int | None = None
        self.metrics_port: int | None = None
        self._register_handlers()

    def _fence_for(self, topic: str, index: int) -> Fence | None:
        """This node's right to change the files of a partition it owns (cluster mode)."""
        assert self.cluster is not None
        return self.cluster.fence_for(owning_partition(topic, index))

    def _make_shards(self) -> ShardManager:
        c = self.config
        coordinator = CoordinatorConfig(
            group_min_session_timeout_ms=c["group.min.session.timeout.ms"],
            group_max_session_timeout_ms=c["group.max.session.timeout.ms"],
            group_initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            group_max_size=c["group.max.size"],
            offsets_retention_ms=c["offsets.retention.minutes"] * 60_000,
            offsets_retention_check_interval_ms=c["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=c["offset.metadata.max.bytes"],
            num_partitions=c["offsets.topic.num.partitions"],
            consumer_session_timeout_ms=c["group.consumer.session.timeout.ms"],
            consumer_heartbeat_interval_ms=c["group.consumer.heartbeat.interval.ms"],
            consumer_max_size=c["group.consumer.max.size"],
            consumer_assignors=tuple(n.strip() for n in c["group.consumer.assignors"].split(",") if n.strip()),
            consumer_migration_policy=c["group.consumer.migration.policy"].strip().lower(),
            group_events_enable=c["group.events.enable"],
        )
        log_config = LogConfig(
            segment_bytes=c["offsets.topic.segment.bytes"],
            cleanup_policy="compact",
            delete_retention_ms=c["log.cleaner.delete.retention.ms"],
            min_compaction_lag_ms=c["log.cleaner.min.compaction.lag.ms"],
            min_cleanable_dirty_ratio=c["log.cleaner.min.cleanable.ratio"],
        )
        return ShardManager(self.logs, c["offsets.topic.num.partitions"], coordinator, self.catalog, log_config,
                            on_transition=self._on_transition, clock=self.clock, cluster=self.cluster,
                            journal=self.journal.write)

    def _make_log_runtime(self) -> LogRuntime:
        """The one runtime that owns every partition log, with the flush policy, the cleaner and
        retention settings that apply to all of them (per-topic configs override the defaults)."""
        c = self.config
        defaults = LogConfig(segment_bytes=c["log.segment.bytes"], retention_ms=c["log.retention.ms"],
                             retention_bytes=c["log.retention.bytes"])
        return LogRuntime(self.data_dir, defaults, sync_flush=c["log.flush.policy"] == "sync",
                          flush_interval_ms=c["log.flush.interval.ms"],
                          cleaner_backoff_ms=c["log.cleaner.backoff.ms"] if c["log.cleaner.enable"] else None,
                          retention_check_ms=c["log.retention.check.interval.ms"], opener=self.log_opener,
                          shared=self.cluster is not None)

    def _on_transition(self, transition: Any) -> None:
        group, old, new, generation, members, reason = transition
        logs.event("group.transition", group=group, from_state=old, to_state=new, generation=generation,
                   members=members, reason=reason)
        # A classic group rebalances from PreparingRebalance; a consumer group (KIP-848) from the
        # moment it leaves Stable or Empty for a new assignment (Assigning, usually straight on to
        # Reconciling: the coordinator computes the assignment in the same operation).
        converging = ("Assigning", "Reconciling")
        if new == "PreparingRebalance" or (new in converging and old not in converging):
            METRICS.rebalances.labels(str(reason).split(":")[0][:60]).inc()
            self._rebalance_started.setdefault(group, time.perf_counter())
        elif new in ("Stable", "Empty", "Dead"):
            started = self._rebalance_started.pop(group, None)
            if started is not None and new == "Stable":
                METRICS.rebalance_seconds.observe(time.perf_counter() - started)

    def _register_handlers(self) -> None:
        from broker.handlers import (
            acls,
            cluster,
            create_partitions,
            fetch,
            groups,
            list_offsets,
            produce,
            sasl,
            scram_credentials,
            topics,
            transactions,
        )
        from broker.topics.partitions import TopicLogs

        self.topic_logs = TopicLogs(self.logs, self.catalog, max_message_bytes=self.config["message.max.bytes"],
                                    cluster=self.cluster)
        self.lag = LagMetrics(self.shards, self.topic_logs, self.catalog, self.cluster_id,
                              self.config["metrics.lag.groups"], self.config["metrics.lag.max.partitions"])
        self.transactions = self._make_transactions()
        cluster.register(self)
        topics.register(self)
        create_partitions.register(self)
        groups.register(self)
        produce.register(self)
        fetch.register(self)
        list_offsets.register(self)
        transactions.register(self)
        sasl.register(self)
        scram_credentials.register(self)
        acls.register(self)
        if self.security.authorizer is not None:
            from broker.security.request_checks import RequestChecks

            self.router.authorize = RequestChecks(self, self.security.authorizer).check

    def _make_transactions(self) -> TransactionService:
        c = self.config
        log_config = LogConfig(
            segment_bytes=c["transaction.state.log.segment.bytes"],
            cleanup_policy="compact",
            delete_retention_ms=c["log.cleaner.delete.retention.ms"],
            min_compaction_lag_ms=c["log.cleaner.min.compaction.lag.ms"],
            min_cleanable_dirty_ratio=c["log.cleaner.min.cleanable.ratio"],
        )
        coordinator = TransactionCoordinator(self.topic_logs.producer_ids.next_id, c["transaction.max.timeout.ms"],
                                             c["transactional.id.expiration.ms"])
        return TransactionService(self.logs, coordinator, MarkerWriter(self.topic_logs, self.shards),
                                  c["transaction.state.log.num.partitions"], log_config, self.clock,
                                  c["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                                  c["transactions.remove.expired.transaction.cleanup.interval.ms"])

    # ---- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str],
                     validate_only: bool = False) -> Topic:
        from broker.topics.partitions import topic_log_config

        try:
            topic_log_config(self.topic_logs.defaults, configs)
        except (ValueError, TypeError) as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"invalid topic config: {exc}") from None
        topic = self.catalog.create(name, partitions, configs, validate_only=validate_only)
        if not validate_only:
            self.topic_logs.create_topic(topic)
            logs.event("topic.created", topic=name, partitions=partitions)
            self.topic_changes.publish(TopicCreated(name, topic.topic_id, partitions))
        return topic

    def grow_topic(self, name: str, count: int) -> Topic:
        """Raises a topic's partition count (validated by the caller). Once the catalog has
        persisted it, Metadata lists the new partitions and the data plane serves them."""
        old = self.catalog.partition_count(name)
        assert old is not None
        topic = self.catalog.grow(name, count)
        self.topic_logs.grow_topic(topic, old)
        logs.event("topic.partitions_added", topic=name, partitions=count, previous=old)
        self.topic_changes.publish(PartitionsAdded(name, topic.topic_id, old, count))
        return topic

    def delete_topic(self, name: str, settlement: Settlement | None = None) -> Topic:
        """Deletes a topic, its logs and (through the group coordinator, which subscribes to
        topic changes) every group's committed offsets of it; ``settlement`` learns when those
        offset tombstones are durable."""
        topic = self.catalog.delete(name)
        self.topic_logs.delete_topic(name)
        logs.event("topic.deleted", topic=name)
        self.topic_changes.publish(TopicDeleted(name, topic.topic_id, topic.partitions), settlement)
        return topic

    def topic_configs(self, topic: Topic) -> dict[str, str]:
        defaults = {
            "cleanup.policy": "delete",
            "retention.ms": str(self.config["log.retention.ms"]),
            "retention.bytes": str(self.config["log.retention.bytes"]),
            "segment.bytes": str(self.config["log.segment.bytes"]),
            "max.message.bytes": str(self.config["message.max.bytes"]),
        }
        defaults.update(topic.configs)
        return defaults

    # ---- serving ----------------------------------------------------------------------------

    def _on_response(self, reply: Reply) -> None:
        if reply.latency is not None:
            reply.latency.observe(time.perf_counter() - reply.received)
        if reply.error_code and reply.message is not None:
            api = reply.message.name.removesuffix("Response")
            try:
                name = ErrorCode(reply.error_code).name
            except ValueError:
                name = str(reply.error_code)
            METRICS.request_errors.labels(api, name).inc()

    def advertised_for(self, conn: ConnectionInfo) -> tuple[str, int]:
        """The address of the listener a client came in through: a client of the SASL_SSL
        listener must be sent back to it, not to the first one."""
        return self.advertised_by_listener.get(conn.listener, self.advertised)

    async def _handle_connection(self, stream: trio.SocketStream, spec: ListenerSpec | None = None) -> None:
        try:
            peer: Any = stream.socket.getpeername()
        except OSError:
            peer = ("?", 0)
        info = ConnectionInfo(next(self._conn_ids), str(peer[0]), int(peer[1]))
        max_bytes = self.config["socket.request.max.bytes"]
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
                while True:
                    await trio.lowlevel.wait_readable(sock)
                    for _ in range(_ACCEPTS_PER_TURN):
                        try:
                            conn, _address = sock.accept()
                        except BlockingIOError:
                            break
                        except OSError as exc:
                            if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                                raise
                            logs.warn("connection.accept_failed", error=errno.errorcode[exc.errno])
                            await trio.sleep(0.1)
                            break
                        stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
                        nursery.start_soon(self._run_connection, stream, spec)
        finally:
            sock.close()

    async def _run_connection(self, stream: trio.SocketStream, spec: ListenerSpec | None = None) -> None:
        try:
            await self._handle_connection(stream, spec)
        except Exception:
            # A connection's failure ends that connection, never the broker: its task runs in the
            # server's nursery, where an escaping error would cancel every other client.
            logs.event("connection.failed", 40, exc_info=True, listener=spec.name if spec else "PLAINTEXT")
        finally:
            await trio.aclose_forcefully(stream)

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
            host, advertised_port = self.advertised_by_listener[spec.name]
            if spec.port == 0 and advertised_port == 0:
                self.advertised_by_listener[spec.name] = (host, port)
        return opened

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listener = self.config.listener
        open_files = raise_open_files_limit()
        opened = await self._open_listeners()
        heap.configure()
        async with trio.open_nursery() as nursery:
            self.bound_port = opened[0][1][0].socket.getsockname()[1]
            if self.config.listener.port == 0 and self.advertised[1] == 0:
                self.advertised = (self.advertised[0], self.bound_port)
            await self._start_services(nursery)
            if self.security.etcd_store is not None:
                # The cluster's users and ACLs, read before any client is served.
                await nursery.start(self.security.etcd_store.run)
            await nursery.start(self.shards.run)
            if self.cluster is None:
                # In a cluster the transaction coordinator does not run: its __transaction_state
                # logs would have no owner, so its APIs answer COORDINATOR_LOAD_IN_PROGRESS and
                # FindCoordinator says transactions need a single-node broker.
                await nursery.start(self.transactions.run)
            if self.cluster is not None:
                self.cluster.address = self.advertised
                self.cluster.listener_addresses = dict(self.advertised_by_listener)
                self.cluster.listener = ClusterListener(self)
                await nursery.start(self.cluster.run)
            nursery.start_soon(self._settle_heap)
            logs.event("broker.started", host=listener.host, port=self.bound_port, node_id=self.node_id,
                       cluster_id=self.cluster_id, data_dir=str(self.data_dir.resolve()),
                       metrics_port=self.metrics_port, open_files_limit=open_files,
                       listeners=",".join(f"{spec.name}:{spec.protocol}:{self.bound_ports[spec.name]}"
                                          for spec, _ in opened))
            if self.readiness.available:
                nursery.start_soon(self.readiness.run)
            for spec, tcp_listeners in opened:
                for tcp_listener in tcp_listeners:
                    nursery.start_soon(self._accept_forever, tcp_listener, nursery, spec)
            task_status.started(self.bound_port)

    async def _settle_heap(self) -> None:
        """What exists once every shard has replayed its log lives as long as the broker: keep it
        out of later garbage collections (broker/heap.py)."""
        while self.shards.loading:
            await trio.sleep(0.05)
        heap.settle()

    async def _start_services(self, nursery: trio.Nursery) -> None:
        from broker.observability.metrics_http import parse_metrics_listener, serve_metrics

        await nursery.start(self.logs.run)
        await trio.to_thread.run_sync(self.journal.open)
        nursery.start_soon(self.journal.run)
        await nursery.start(self.topic_logs.run)
        endpoint = parse_metrics_listener(self.config["metrics.listener"], self.config.listener.host)
        if endpoint is not None:
            try:
                self.metrics_port = await nursery.start(serve_metrics, *endpoint, self.lag.render)
            except OSError as exc:
                # Metrics are for operators; a busy port must not keep the broker from serving clients.
                logs.warn("metrics.unavailable", host=endpoint[0], port=endpoint[1], error=str(exc))

    def _all_partitions(self) -> list[tuple[str, int]]:
        """Every partition a cluster spreads over its nodes; publishes what other nodes changed
        in the topic catalog on the way (this runs a few times a second)."""
        self.catalog.refresh()
        changes, self.catalog.changes = self.catalog.changes, []
        for change in changes:
            if isinstance(change, TopicDeleted):
                for p in range(change.partitions):
                    self.topic_logs.lose((change.topic, p))
            self.topic_changes.publish(change)
        # The journal's partitions are not owned of their own: each follows the __consumer_offsets
        # partition of the same index.
        return [(topic.name, p) for topic in list(self.catalog.topics.values()) if topic.name != EVENTS_TOPIC
                for p in range(topic.partitions)]

    async def stop_serving(self) -> None:
        """Controlled shutdown of a cluster node: hand every partition over now."""
        if self.cluster is not None:
            with trio.move_on_after(10):
                await self.cluster.shutdown()

    async def close(self) -> None:
        """Flushes and closes everything the broker opened (called after serving stops)."""
        try:
            try:
                # Before the logs close: the snapshots are built from their durable bytes.
                self.shards.write_snapshots()
            finally:
                self.journal.close()
                self.logs.close()
        finally:
            # Last, so that the next broker on this directory starts only after every file is closed.
            for lock in reversed(self.dir_locks):
                lock.release()


class ClusterListener:
    """What the broker does when this node gains, must hand over, or loses a partition."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def on_gain(self, partition: tuple[str, int], epoch: int) -> None:
        topic, index = partition
        if topic == OFFSETS_TOPIC:
            # The journal partition first: the shard's load already writes events to it.
            self.broker.journal.gain(index, epoch)
            self.broker.shards.runtimes[index].gain(epoch)
        else:
            self.broker.logs.spawn(self.broker.topic_logs.gain, partition, epoch)

    async def on_release(self, partition: tuple[str, int]) -> None:
        topic, index = partition
        if topic == OFFSETS_TOPIC:
            await self.broker.shards.runtimes[index].release()
            await self.broker.journal.release(index)
        else:
            await self.broker.topic_logs.release(partition)

    def on_lose(self, partition: tuple[str, int]) -> None:
        topic, index = partition
        if topic == OFFSETS_TOPIC:
            self.broker.shards.runtimes[index].lose()
            self.broker.journal.lose(index)
        else:
            self.broker.topic_logs.lose(partition)


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
