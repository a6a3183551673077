"""The composition root: builds every service of a broker from its configuration and hands each
part only what it needs.

Services: the log runtime (every partition log), the topic catalog and the topic logs, topic
administration, the cluster view (nodes and partition leaders), the group coordinator's shards and
the rebalance journal, the transaction coordinator, the authorizer and the credentials, the
metrics. The handlers are built over those services, the table of APIs (broker/apis.py) over the
handlers, and the router over the table. ``broker/server.py`` listens and accepts connections and
hands their requests to the router; this module starts and stops what serves them.
"""

from __future__ import annotations

import itertools
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from broker import heap
from broker.apis import Handlers, api_table, router_apis
from broker.cluster.assignment import owning_partition
from broker.cluster.node import ClusterNode
from broker.cluster.peers import PeerClient, PeerSecret
from broker.cluster.view import ClusterView
from broker.configs.node_config import BrokerConfig, parse_console_listener, parse_metrics_listener
from broker.configs.topic_defs import check_topic_config
from broker.configs.wiring import build_config_service, follow
from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.result import Transition
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.coordinators.group.service.journal_writer import JournalWriter
from broker.coordinators.group.service.lag_metrics import LagMetrics
from broker.coordinators.group.service.state_metrics import doctor_families, state_families
from broker.coordinators.share.service.coordinator import STATE_TOPIC as SHARE_STATE_TOPIC
from broker.coordinators.share.service.coordinator import ShareCoordinatorService
from broker.coordinators.transaction.service.coordinator import TransactionCoordinatorService
from broker.coordinators.transaction.service.markers import MarkerWriter
from broker.coordinators.transaction.service.verification import PartitionAdder
from broker.handlers.acls import AclApis
from broker.handlers.client_quotas import ClientQuotaApis
from broker.handlers.cluster import ApiVersionsApi, ClusterApis
from broker.handlers.configs import ConfigApis
from broker.handlers.create_partitions import CreatePartitionsApi
from broker.handlers.delegation_tokens import DelegationTokenApis
from broker.handlers.fetch import FetchApi
from broker.handlers.groups import GroupApis, GroupRouting
from broker.handlers.list_offsets import ListOffsetsApi
from broker.handlers.log_dirs import LogDirApis
from broker.handlers.produce import ProduceApi, append_records
from broker.handlers.records import RecordApis
from broker.handlers.request_checks import RequestChecks
from broker.handlers.sasl import SaslApis
from broker.handlers.scram_credentials import ScramCredentialApis
from broker.handlers.share import ShareApis
from broker.handlers.share_admin import ShareOffsetApis
from broker.handlers.share_state import ShareStateApis
from broker.handlers.streams_groups import StreamsGroupApis, may_create_topics
from broker.handlers.telemetry import TelemetryApis
from broker.handlers.topics import TopicApis
from broker.handlers.topology import TopologyApis
from broker.handlers.transactions import TransactionApis
from broker.handlers.write_txn_markers import WriteTxnMarkersApi
from broker.log_runtime.runtime import LogRuntime
from broker.network.connection_limits import ConnectionCounter
from broker.network.router import Router
from broker.observability import logs
from broker.observability.metrics import METRICS, install_state_collector
from broker.observability.metrics_http import serve_metrics
from broker.quotas import enforcement
from broker.quotas.enforcement import QuotaEnforcer, monotonic_ms
from broker.quotas.etcd_store import EtcdQuotaStore
from broker.quotas.store import QuotaStore
from broker.runtime.countdown import Countdown
from broker.runtime.timers import steady_ms, wall_ms
from broker.security.context import SecurityContext
from broker.security.etcd_access import check_access, etcd_client
from broker.security.gssapi_sasl import KerberosLoginFailed
from broker.security.gssapi_sasl import login as kerberos_login
from broker.security.jwks import JwksRefresher, JwksUnavailable
from broker.security.token_store import sweep_expired
from broker.share_partitions.service.dead_letters import DeadLetterQueues
from broker.share_partitions.service.manager import Persister, SharePartitionManager
from broker.share_partitions.service.metrics import share_families
from broker.share_partitions.service.remote import ClusterPersister
from broker.telemetry import service as telemetry_service
from broker.telemetry.etcd_store import EtcdSubscriptionStore
from broker.telemetry.service import TelemetryService
from broker.telemetry.subscriptions import SubscriptionStore
from broker.topics.admin import TopicAdmin
from broker.topics.catalog import EVENTS_TOPIC, OFFSETS_TOPIC, TopicCatalog
from broker.topics.changes import TopicChanges
from broker.topics.fetch_sessions import FetchSessionCache
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.partitioning import partition_for
from protocol.payloads.transaction_log_records import TRANSACTION_STATE_TOPIC
from storage.checkpoints import CheckpointError, read_meta_properties, write_meta_properties
from storage.config import LogConfig
from storage.dir_lock import DataDirError, DirLock, acquire, open_data_dir
from storage.fencing import Fence
from storage.log_manager import LogOpener
from storage.partition_log import PartitionLog

if TYPE_CHECKING:
    from broker.console.share_figures import ShareDeliveries


def _load_cluster_id(data_dir: Path, configured: str, node_id: int) -> str:
    """Kafka keeps node and cluster ids in meta.properties; a configured cluster.id must match it."""
    try:
        props = read_meta_properties(data_dir)
    except CheckpointError as exc:
        raise SystemExit(str(exc)) from None
    existing = props.get("cluster.id")
    if existing and configured and existing != configured:
        raise SystemExit(f"cluster.id {configured!r} does not match {existing!r} in {data_dir / 'meta.properties'}")
    cluster_id = existing or configured or urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not existing:
        write_meta_properties(data_dir, {"version": "1", "node.id": str(node_id), "cluster.id": cluster_id})
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


def coordinator_config(c: BrokerConfig) -> CoordinatorConfig:
    return CoordinatorConfig(
        group_min_session_timeout_ms=c.get_int("group.min.session.timeout.ms"),
        group_max_session_timeout_ms=c.get_int("group.max.session.timeout.ms"),
        group_initial_rebalance_delay_ms=c.get_int("group.initial.rebalance.delay.ms"),
        group_max_size=c.get_int("group.max.size"),
        offsets_retention_ms=c.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=c.get_int("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=c.get_int("offset.metadata.max.bytes"),
        num_partitions=c.get_int("offsets.topic.num.partitions"),
        consumer_session_timeout_ms=c.get_int("group.consumer.session.timeout.ms"),
        streams_session_timeout_ms=c.get_int("group.streams.session.timeout.ms"),
        streams_heartbeat_interval_ms=c.get_int("group.streams.heartbeat.interval.ms"),
        streams_num_standby_replicas=c.get_int("group.streams.num.standby.replicas"),
        streams_rack_aware_assignment_tags=c.get_str("group.streams.rack.aware.assignment.tags"),
        streams_max_size=c.get_int("group.streams.max.size"),
        streams_topology_descriptions=bool(c.get_str("group.streams.topology.description.plugin.class")),
        streams_initial_rebalance_delay_ms=c.get_int("group.streams.initial.rebalance.delay.ms"),
        consumer_heartbeat_interval_ms=c.get_int("group.consumer.heartbeat.interval.ms"),
        consumer_max_size=c.get_int("group.consumer.max.size"),
        consumer_assignment_interval_ms=c.get_int("group.consumer.assignment.interval.ms"),
        consumer_assignors=tuple(n.strip() for n in c.get_str("group.consumer.assignors").split(",") if n.strip()),
        consumer_migration_policy=c.get_str("group.consumer.migration.policy").strip().lower(),
        share_session_timeout_ms=c.get_int("group.share.session.timeout.ms"),
        share_heartbeat_interval_ms=c.get_int("group.share.heartbeat.interval.ms"),
        share_assignment_interval_ms=c.get_int("group.share.assignment.interval.ms"),
        share_max_size=c.get_int("group.share.max.size"),
        group_events_enable=c.get_bool("group.events.enable"),
    )


def _compacted_log_config(c: BrokerConfig, segment_bytes: int) -> LogConfig:
    """The settings of an internal, compacted log (__consumer_offsets, __transaction_state)."""
    return LogConfig(
        segment_bytes=segment_bytes,
        cleanup_policy="compact",
        delete_retention_ms=c.get_int("log.cleaner.delete.retention.ms"),
        min_compaction_lag_ms=c.get_int("log.cleaner.min.compaction.lag.ms"),
        min_cleanable_dirty_ratio=c.get_float("log.cleaner.min.cleanable.ratio"),
    )


class RebalanceMetrics:
    """Counts rebalances and times them, from the transitions of groups the shards report."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}

    def on_transition(self, transition: Transition) -> None:
        group, old, new, generation, members, reason = transition
        logs.event("group.transition", group=group, from_state=old, to_state=new, generation=generation,
                   members=members, reason=reason)
        # A classic group rebalances from PreparingRebalance; a consumer group (KIP-848) from the
        # moment it leaves Stable or Empty for a new assignment (Assigning, usually straight on to
        # Reconciling: the coordinator computes the assignment in the same operation).
        converging = ("Assigning", "Reconciling")
        if new == "PreparingRebalance" or (new in converging and old not in converging):
            METRICS.rebalances.labels(str(reason).split(":")[0][:60]).inc()
            self._started.setdefault(group, time.perf_counter())
        elif new in ("Stable", "Empty", "Dead"):
            started = self._started.pop(group, None)
            if started is not None and new == "Stable":
                METRICS.rebalance_seconds.observe(time.perf_counter() - started)


class BrokerApp:
    """Every service of one broker, built from its configuration, and their start and stop."""

    def __init__(self, config: BrokerConfig, *, log_opener: LogOpener = PartitionLog.open,
                 clock: Callable[[], int] = wall_ms) -> None:
        """``log_opener`` opens every partition log and ``clock`` is the coordinator's wall clock
        in ms; both are replaceable so that the whole shell can run in one process against logs
        and time that a test controls."""
        c = self.config = config
        self.clock = clock
        self.node_id = c.get_int("node.id")
        self.data_dir = config.data_dir
        endpoints = c.get_str("etcd.endpoints")
        clustered = bool(endpoints.strip())
        # First, before meta.properties or any log is read or written: a second broker on this
        # directory must stop here, having changed nothing that the first one owns.
        self.dir_locks = _lock_data_dir(self.data_dir, self.node_id if clustered else None)
        self.cluster_id = _load_cluster_id(self.data_dir, c.get_str("cluster.id"), self.node_id)
        offsets_partitions = c.get_int("offsets.topic.num.partitions")
        self.catalog = TopicCatalog(self.data_dir, offsets_partitions, shared=clustered)
        self.cluster: ClusterNode | None = None
        if clustered:
            prefix = c.get_str("etcd.prefix").strip() or f"/kcoord/{self.cluster_id}"
            self.cluster = ClusterNode(etcd_client(c.values), prefix, self.node_id, config.advertised.host,
                                       config.advertised.port, c.get_int("broker.session.timeout.ms"),
                                       self._all_partitions)
        # Requests to the other nodes (transaction markers, KIP-890 checks), and the secret that
        # proves them to come from a node.
        self.peer_secret = PeerSecret()
        self.peers = None if self.cluster is None else PeerClient(self.cluster, self.peer_secret)
        self.view = ClusterView(self.node_id, self.cluster_id, self.cluster,
                                (config.advertised.host, config.advertised.port), dict(config.advertised_by_listener))
        self.security = SecurityContext(config, self.data_dir, None if self.cluster is None else (
            self.cluster.client, self.cluster.prefix))
        # The one runtime that owns every partition log, with the flush policy, the cleaner and
        # retention settings that apply to all of them (per-topic configs override the defaults).
        self.logs = LogRuntime(
            self.data_dir, LogConfig(segment_bytes=c.get_int("log.segment.bytes"), retention_ms=c.get_int("log.retention.ms"),
                                     retention_bytes=c.get_int("log.retention.bytes")),
            sync_flush=c.get_str("log.flush.policy") == "sync", flush_interval_ms=c.get_int("log.flush.interval.ms"),
            cleaner_backoff_ms=c.get_int("log.cleaner.backoff.ms") if c.get_bool("log.cleaner.enable") else None,
            retention_check_ms=c.get_int("log.retention.check.interval.ms"), opener=log_opener, shared=clustered)
        if self.cluster is not None:
            self.logs.may_write = self.cluster.may_write
            self.logs.fence_for = self._fence_for
        # One writer per log: in cluster mode the journal has a partition per __consumer_offsets
        # partition, written by the node that owns that shard (``ClusterListener``).
        self.journal = JournalWriter(self.logs, self.catalog, retention_ms=c.get_int("group.events.retention.ms"),
                                     segment_bytes=c.get_int("log.segment.bytes"), enabled=c.get_bool("group.events.enable"),
                                     partitions=1 if self.cluster is None else offsets_partitions,
                                     clustered=self.cluster is not None)
        self.rebalances = RebalanceMetrics()
        self.shards = GroupCoordinatorService(self.logs, offsets_partitions, coordinator_config(c), self.catalog,
                                   _compacted_log_config(c, c.get_int("offsets.topic.segment.bytes")),
                                   on_transition=self.rebalances.on_transition, clock=clock, cluster=self.cluster,
                                   journal=self.journal.write)
        # Created, grown and deleted topics, as the group coordinator must follow them.
        self.topic_changes = TopicChanges()
        self.topic_changes.subscribe(self.shards.on_topic_change)

        self.topic_logs = TopicLogs(self.logs, self.catalog, max_message_bytes=c.get_int("message.max.bytes"),
                                    cluster=self.cluster)
        self.admin = TopicAdmin(self.catalog, self.topic_logs, self.topic_changes, {
            "cleanup.policy": "delete",
            "retention.ms": str(c.get_int("log.retention.ms")),
            "retention.bytes": str(c.get_int("log.retention.bytes")),
            "segment.bytes": str(c.get_int("log.segment.bytes")),
            "max.message.bytes": str(c.get_int("message.max.bytes")),
        }, check_topic_config)
        # The client connections held (max.connections and its kin, changed by AlterConfigs too).
        self.connection_counter = ConnectionCounter(c.connection_limits)
        # Configs of topics, brokers and groups (AlterConfigs and its kin), in effect from here on.
        self.configs = build_config_service(c, self.node_id, self.data_dir, shared=clustered, catalog=self.catalog,
                                            topic_logs=self.topic_logs, admin=self.admin, shards=self.shards,
                                            connections=self.connection_counter)
        self.lag = LagMetrics(self.shards, self.topic_logs, self.catalog, self.cluster_id,
                              c.get_str("metrics.lag.groups"), c.get_int("metrics.lag.max.partitions"))
        self.transactions = TransactionCoordinatorService(
            self.logs, self.topic_logs.producer_ids.next_id,
            MarkerWriter(self.topic_logs, self.shards, self.cluster, self.peers),
            c.get_int("transaction.state.log.num.partitions"),
            _compacted_log_config(c, c.get_int("transaction.state.log.segment.bytes")), clock,
            c.get_int("transactions.remove.expired.transaction.cleanup.interval.ms"),
            max_timeout_ms=c.get_int("transaction.max.timeout.ms"),
            id_expiration_ms=c.get_int("transactional.id.expiration.ms"), cluster=self.cluster,
            transaction_version=c.get_int("transaction.version"),
            two_phase_commit=c.get_bool("transaction.two.phase.commit.enable"))
        # The share coordinator (__share_group_state) runs on the coordinator runtime; share
        # partitions are served on one node for now (in a cluster ShareFetch and the rest are not).
        # Each share group obeys its own share.* group configs over the broker's group.share.*.
        self.share_state = ShareCoordinatorService(
            self.logs, c.get_int("share.coordinator.state.topic.num.partitions"),
            _compacted_log_config(c, c.get_int("offsets.topic.segment.bytes")), clock,
            updates_per_snapshot=c.get_int("share.coordinator.snapshot.update.records.per.snapshot"),
            cold_snapshot_interval_ms=c.get_int("share.coordinator.cold.partition.snapshot.interval.ms"),
            cluster=self.cluster)
        # Share partitions live on the node leading their topic partition; their state is read and
        # written at the share coordinator of the key (this node's, or in a cluster its owner's).
        persister: Persister = self.share_state if self.cluster is None or self.peers is None else \
            ClusterPersister(self.share_state, self.cluster, self.peers)
        # Records a share group archives (rejected, or at the delivery limit) go to its dead-letter
        # queue topic, wherever that topic's partition is led.
        self.dead_letters = DeadLetterQueues(
            self.configs.share_settings, self.catalog, self._append_dead_letters, self.topic_logs.record_at,
            lambda name, configs: self.admin.create_topic(name, c.get_int("num.partitions"), configs),
            auto_create=c.get_bool("errors.deadletterqueue.auto.create.topics.enable"),
            prefix=c.get_str("errors.deadletterqueue.topic.name.prefix"), clock=clock)
        self.share = SharePartitionManager(
            persister, self.configs.share_settings, clock, c.get_int("group.share.max.share.sessions"),
            c.get_int("group.share.session.timeout.ms"), local=self.share_state, leader_epoch=self._share_leader_epoch,
            reread_at_session_open=self.cluster is not None, group_partitions=self._share_group_partitions,
            # Records archived at the delivery limit and expired locks, as journal events of the
            # share group (written where the group's journal partition is this node's).
            journal=self.journal.write if self.journal.enabled else None, group_info=self._share_group_info,
            topic_name=lambda topic_id: (t.name if (t := self.catalog.by_id.get(topic_id)) is not None else None),
            steady=steady_ms, dead_letters=self.dead_letters.send)
        self.topic_changes.subscribe(self.share.on_topic_change)
        self.fetch_sessions = FetchSessionCache(c.get_int("max.incremental.fetch.session.cache.slots"),
                                                on_evict=METRICS.fetch_session_evictions.inc)
        install_state_collector(lambda: itertools.chain(state_families(self.shards), doctor_families(self.journal),
                                                        share_families(self.shards, self.share,
                                                                       self._share_partition_end),
                                                        self.fetch_sessions.families()))
        self.router = Router()
        self.router.frames_done_hooks.append(self.logs.kick)
        self.router.frames_coming_hooks.append(self.logs.kick_coming)
        if self.share is not None:
            share = self.share
            self.router.closed_hooks.append(lambda info: share.close_sessions_of(info.conn_id))
        # ---- client quotas and client telemetry (KIP-714) ----
        self.quotas = QuotaStore(self.data_dir)
        self.quotas_etcd = None if self.cluster is None else EtcdQuotaStore(
            self.cluster.client, self.cluster.prefix, self.quotas, self.data_dir)
        self.enforcer = QuotaEnforcer(self.quotas, c.get_int("quota.window.num"), c.get_int("quota.window.size.seconds"))
        enforcement.install_collector(self.enforcer)
        # The router calls the enforcer only while some quota is configured: a broker without
        # quotas pays nothing for them on each request.
        self.quotas.listeners.append(self._observe_quotas)
        self._observe_quotas()
        subscriptions = SubscriptionStore(self.data_dir)
        self.subscriptions_etcd = None if self.cluster is None else EtcdSubscriptionStore(
            self.cluster.client, self.cluster.prefix, subscriptions, self.data_dir)
        self.telemetry = TelemetryService(subscriptions, c.get_int("telemetry.max.bytes"), monotonic_ms)
        telemetry_service.install_collector(self.telemetry)
        self.handlers = self._make_handlers()
        self.router.raw_sasl_token = self.handlers.sasl.raw_token
        authorizer = self.security.authorizer
        self.table = api_table(self.handlers)
        self.checks = None if authorizer is None else RequestChecks(self.catalog, authorizer, self.peer_secret)
        self.router.install(router_apis(self.table, self.checks))
        self.metrics_port: int | None = None
        self.console_port: int | None = None

    def _observe_quotas(self) -> None:
        self.router.observer = self.enforcer.observe if self.quotas.quotas else None

    def _make_handlers(self) -> Handlers:
        c = self.config
        security = self.security
        authorizer = security.authorizer
        offsets_partitions = c.get_int("offsets.topic.num.partitions")
        verify_transactions = c.get_bool("transaction.partition.verification.enable")
        groups = GroupApis(self.shards, c.get_int("message.max.bytes"),
                           None if authorizer is None else authorizer.describable_topics,
                           transactions=self.transactions if verify_transactions else None, clock=self.clock,
                           offsets_partitions=offsets_partitions,
                           delete_share_state=None if self.share is None else self.share.forget_group,
                           adder=PartitionAdder(self.transactions, self.cluster, self.peers))
        return Handlers(
            api_versions=ApiVersionsApi(self.router.advertised, self.view, c.get_int("transaction.version")),
            cluster=ClusterApis(self.view, self.catalog, self.admin, self.transactions,
                                auto_create_topics=c.get_bool("auto.create.topics.enable"),
                                default_partitions=c.get_int("num.partitions"), offsets_partitions=offsets_partitions,
                                share_state_partitions=self.share_state.num_partitions),
            topics=TopicApis(self.admin, self.catalog, c.get_int("num.partitions")),
            create_partitions=CreatePartitionsApi(self.catalog, self.node_id, self.admin.grow_topic),
            groups=groups,
            streams_groups=StreamsGroupApis(self.shards, groups.routing, self.admin,
                                            None if authorizer is None else may_create_topics(authorizer)),
            produce=ProduceApi(self.topic_logs, self.catalog, self.transactions, self.clock, self.cluster, self.peers,
                               verify=verify_transactions),
            fetch=FetchApi(self.topic_logs, self.catalog, self.fetch_sessions, self.clock, authorizer),
            share=ShareApis(self.shards, GroupRouting(self.shards), self.share, self.topic_logs, self.catalog,
                            self.node_id),
            share_offsets=ShareOffsetApis(GroupRouting(self.shards), self.share, self.topic_logs, self.catalog,
                                          self._remote_ends),
            list_offsets=ListOffsetsApi(self.topic_logs, self.catalog),
            records=RecordApis(self.topic_logs, self.catalog, self.view),
            log_dirs=LogDirApis(self.data_dir, self.topic_logs, self.catalog),
            transactions=TransactionApis(self.transactions, self.catalog, offsets_partitions,
                                         self.topic_logs.producer_ids, self.clock,
                                         unstable_api_versions=c.get_bool("unstable.api.versions.enable")),
            sasl=SaslApis(security.sasl_listeners, security.credentials, c.get_int("connections.max.reauth.ms"),
                          c.get_int("connection.failed.authentication.delay.ms") / 1000, security.tokens),
            scram=ScramCredentialApis(security.credentials, security.etcd_store, self.logs),
            tokens=DelegationTokenApis(security.token_store, authorizer,
                                       {spec.name: spec.protocol for spec in self.config.listeners}, self.clock,
                                       self.logs),
            acls=AclApis(authorizer, security.etcd_store, self.logs),
            topology=TopologyApis(self.view, self.catalog, authorizer,
                                  lambda: [k for k, _, _ in self.router.advertised()], self.clock,
                                  c.get_int("transaction.version")),
            client_quotas=ClientQuotaApis(self.quotas, self.quotas_etcd, self.logs),
            telemetry=TelemetryApis(self.telemetry),
            configs=ConfigApis(self.configs, self.view, self.telemetry.subscriptions, self.logs),
            write_txn_markers=None if self.cluster is None else
            WriteTxnMarkersApi(self.transactions.markers, self.peer_secret),
            share_state=None if self.cluster is None else ShareStateApis(self.share_state, self.peer_secret),
        )

    # ---- running ------------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Starts every service in ``nursery``, in order, returning once clients may be served."""
        if self.cluster is not None:  # etcd refusing this node's credentials or rights stops it here
            await check_access(self.cluster.client, self.cluster.prefix)
        await nursery.start(self.logs.run)
        for listener, sasl in self.security.sasl_listeners.items():
            if sasl.gssapi is not None:  # as Kafka's broker, one whose Kerberos login fails does not start
                try:
                    await trio.to_thread.run_sync(kerberos_login, sasl.gssapi)
                except KerberosLoginFailed as exc:
                    raise SystemExit(f"kcoord: listener {listener}: cannot log in to Kerberos as {exc}") from None
        for keys in self.security.jwks:
            try:
                await nursery.start(JwksRefresher(keys).run)
            except JwksUnavailable as exc:  # as Kafka's broker, one that cannot check tokens does not start
                raise SystemExit(f"kcoord: cannot fetch the OAUTHBEARER key set: {exc}") from None
        await trio.to_thread.run_sync(self.journal.open)
        nursery.start_soon(self.journal.run)
        await nursery.start(self.topic_logs.run)
        endpoint = parse_metrics_listener(self.config.get_str("metrics.listener"), self.config.listener.host)
        if endpoint is not None:
            try:
                self.metrics_port = await nursery.start(serve_metrics, *endpoint, self.lag.render)
            except OSError as exc:
                # Metrics are for operators; a busy port must not keep the broker from serving clients.
                logs.warn("metrics.unavailable", host=endpoint[0], port=endpoint[1], error=str(exc))
        await self._start_console(nursery)
        if self.security.etcd_store is not None:
            # The cluster's users and ACLs, read before any client is served.
            await nursery.start(self.security.etcd_store.run)
        if self.quotas_etcd is not None:
            # The cluster's client quotas, read before any client is served.
            await nursery.start(self.quotas_etcd.run)
        if self.subscriptions_etcd is not None:
            await nursery.start(self.subscriptions_etcd.run)
        await nursery.start(self.shards.run)
        await nursery.start(self.share_state.run)
        await nursery.start(self.dead_letters.run)
        if self.share is not None:
            await nursery.start(self.share.run)
        # In a cluster the coordinator loads each __transaction_state partition as it is claimed.
        await nursery.start(self.transactions.run)
        if self.cluster is not None and self.peers is not None:
            await self.peer_secret.load(self.cluster.client, self.cluster.prefix)
            await nursery.start(self.peers.run)
            self.cluster.address = self.view.advertised
            self.cluster.listener_addresses = dict(self.view.advertised_by_listener)
            self.cluster.listener = ClusterListener(self.shards, self.journal, self.topic_logs, self.logs,
                                                    self.transactions, self.share_state)
            await nursery.start(self.cluster.run)
        if self.cluster is not None:
            nursery.start_soon(follow, self.configs)
        if self.security.tokens.enabled:
            nursery.start_soon(sweep_expired, self.security.token_store, self.security.token_check_interval_ms,
                               self.clock)
        nursery.start_soon(self._settle_heap)

    async def _start_console(self, nursery: trio.Nursery) -> None:
        console = parse_console_listener(self.config.get_str("console.listener"), self.config.listener.host)
        if console is None:
            return
        scheme, host, port = console
        endpoint = (host, port)
        from broker.console.server import ActionRules, reading_through, serve_console

        bootstrap, listeners = reading_through(self.config.listeners, self.view.advertised_by_listener)
        if bootstrap is None:
            # The console reads the cluster as a client does, without credentials of its own.
            logs.warn("console.unavailable", reason="no PLAINTEXT listener to read the cluster through")
            return
        tls = None
        if scheme == "https":
            import ssl

            from broker.console.https import console_context
            from broker.security.keystores import KeystoreError

            try:
                tls = console_context(self.config.values)
            except (OSError, ssl.SSLError, KeystoreError) as exc:
                # As for a busy port: the broker serves its clients without its console.
                logs.warn("console.unavailable", reason="cannot load the TLS keystore or truststore", error=str(exc))
                return
        try:
            rules = ActionRules(self.config.get_bool("console.actions.enable"), self.checks, self.table,
                                self.security.credentials.check_password, self.security.principal_mapper)
            self.console_port = await nursery.start(
                serve_console, *endpoint, bootstrap, listeners, self.lag.render, rules,
                self._console_share, tls)
        except OSError as exc:
            # As for metrics: a busy port must not keep the broker from serving clients.
            logs.warn("console.unavailable", host=endpoint[0], port=endpoint[1], error=str(exc))

    def _append_dead_letters(self, topic: str, partition: int, raw: bytes, done: Callable[[int], None]) -> None:
        """A batch of dead letters to ``topic``-``partition``: appended here when this node leads
        it, else produced to the node that does (acks=all), as Kafka's brokers send them."""
        if self.cluster is None or self.cluster.owns(owning_partition(topic, partition)):
            append_records(self.topic_logs, topic, partition, raw, done)
            return
        owner = self.cluster.owner_of(owning_partition(topic, partition))
        if owner is None or self.peers is None:
            done(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        Topic = ProduceRequest.TopicProduceData
        request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
            Topic(name=topic, partition_data=[Topic.PartitionProduceData(index=partition, records=raw)])])

        def answered(response: ProduceResponse | None) -> None:
            codes = [p.error_code for t in (response.responses if response is not None else [])
                     for p in t.partition_responses]
            done(codes[0] if codes else ErrorCode.REQUEST_TIMED_OUT)

        self.peers.send(owner[0], ApiKey.Produce, 9, request, answered)

    def _remote_ends(self, wanted: list[tuple[str, int]], done: Callable[[dict[tuple[str, int], int]], None]) -> None:
        """The high watermarks of partitions other nodes lead (ListOffsets LATEST to each leader),
        for a share group's lag; those no leader answers are left out."""
        by_node: dict[int, list[tuple[str, int]]] = {}
        if self.cluster is not None and self.peers is not None:
            for topic, index in wanted:
                owner = self.cluster.owner_of(owning_partition(topic, index))
                if owner is not None and owner[0] != self.cluster.node_id:
                    by_node.setdefault(owner[0], []).append((topic, index))
        ends: dict[tuple[str, int], int] = {}
        countdown = Countdown(len(by_node), lambda ok: done(ends))
        T = ListOffsetsRequest.Topic
        for node, tps in by_node.items():
            topics: dict[str, list[int]] = {}
            for topic, index in tps:
                topics.setdefault(topic, []).append(index)
            request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=name, partitions=[
                T.Partition(partition_index=i, timestamp=-1) for i in indexes]) for name, indexes in topics.items()])

            def answered(response: ListOffsetsResponse | None) -> None:
                for t in response.topics if response is not None else []:
                    for part in t.partitions:
                        if part.error_code == ErrorCode.NONE:
                            ends[(t.name, part.partition_index)] = part.offset
                countdown.arrive(True)

            assert self.peers is not None
            self.peers.send(node, ApiKey.ListOffsets, 7, request, answered)

    def _share_group_info(self, group_id: str) -> tuple[int, str] | None:
        """(epoch, state) of a share group this node coordinates, for its journal events."""
        slot = self.shards.runtimes[partition_for(group_id, self.shards.num_partitions)]
        if not slot.loaded or not slot.serving:
            return None
        group = slot.shard.state.share_groups.get(group_id)
        return None if group is None else (group.group_epoch, group.state)

    def _share_leader_epoch(self, topic_id: bytes, index: int) -> int | None:
        """The leader epoch this node writes a share partition's state with: -1 on a single broker
        (no fencing needed), in a cluster its claim's epoch of the topic partition (a later
        leader's is higher, and fences this one's writes), None when it does not lead it."""
        if self.cluster is None:
            return -1
        topic = self.catalog.by_id.get(topic_id)
        if topic is None:
            return None
        partition = owning_partition(topic.name, index)
        if not self.cluster.owns(partition):
            return None
        return self.cluster.mine[partition] & 0x7FFFFFFF

    def _share_group_partitions(self, topic_id: bytes) -> list[tuple[str, bytes, int]]:
        """The share partitions of ``topic_id`` that the share groups of the group shards this
        node serves initialized (or are initializing)."""
        return [key for runtime in self.shards.serving_runtimes() if runtime.loaded
                for key in runtime.shard.share_partitions(topic_id=topic_id)]

    def _console_share(self, group_id: str) -> ShareDeliveries:
        """A share group's deliveries on this node for its console page: the share metrics' figures
        and the acquisition locks its records are held by."""
        from broker.console.share_figures import ShareDeliveries, held_locks, share_figures

        figures = share_figures(share_families(self.shards, self.share, self._share_partition_end), group_id)
        if self.share is None:
            return ShareDeliveries(figures)
        held, first = held_locks(self.share.partitions, group_id, self._topic_name, self.share.steady())
        return ShareDeliveries(figures, held, first)

    def _topic_name(self, topic_id: bytes, index: int) -> str | None:
        topic = self.catalog.by_id.get(topic_id)
        return None if topic is None else topic.name

    def _share_partition_end(self, topic_id: bytes, index: int) -> tuple[str, int] | None:
        """A share partition's topic name and high watermark (its lag gauge), None when gone."""
        topic = self.catalog.by_id.get(topic_id)
        src = self.topic_logs.readable(topic, index) if topic is not None else None
        if topic is None or src is None or isinstance(src, int):
            return None
        return topic.name, src.high_watermark

    def _fence_for(self, topic: str, index: int) -> Fence | None:
        """This node's right to change the files of a partition it owns (cluster mode)."""
        assert self.cluster is not None
        return self.cluster.fence_for(owning_partition(topic, index))

    async def _settle_heap(self) -> None:
        """What exists once every shard has replayed its log lives as long as the broker: keep it
        out of later garbage collections (broker/heap.py)."""
        await self.shards.runtime.until_loaded()
        heap.settle()

    def _all_partitions(self) -> list[tuple[str, int]]:
        """Every partition a cluster spreads over its nodes; publishes what other nodes changed
        in the topic catalog on the way (this runs a few times a second)."""
        self.catalog.refresh()
        self.admin.catch_up()
        # The journal's partitions are not owned of their own: each follows the __consumer_offsets
        # partition of the same index. The transaction coordinator's partitions are owned like the
        # group coordinator's. A deleted topic's directory that nobody owns is owned for a moment,
        # by the node that removes it.
        return [(topic.name, p) for topic in list(self.catalog.topics.values()) if topic.name != EVENTS_TOPIC
                for p in range(topic.partitions)] + \
            [(TRANSACTION_STATE_TOPIC, p) for p in range(self.transactions.num_partitions)] + \
            [(SHARE_STATE_TOPIC, p) for p in range(self.share_state.num_partitions)] + \
            self.topic_logs.leftovers()

    async def stop_serving(self) -> None:
        """Controlled shutdown of a cluster node: hand every partition over now."""
        if self.cluster is not None:
            with trio.move_on_after(10):
                await self.cluster.shutdown()

    def close(self) -> None:
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
    """What this node does when it gains, must hand over, or loses a partition: a shard of the
    group coordinator with its journal partition, a partition of the transaction coordinator, or a
    topic partition."""

    def __init__(self, shards: GroupCoordinatorService, journal: JournalWriter, topic_logs: TopicLogs,
                 logs_runtime: LogRuntime, transactions: TransactionCoordinatorService, share_state: ShareCoordinatorService) -> None:
        self.transactions = transactions
        self.share_state = share_state
        self.shards = shards
        self.journal = journal
        self.topic_logs = topic_logs
        self.logs = logs_runtime

    def on_gain(self, partition: tuple[str, int], epoch: int) -> None:
        topic, index = partition
        if topic == TRANSACTION_STATE_TOPIC:
            self.transactions.gain(index, epoch)
        elif topic == SHARE_STATE_TOPIC:
            self.share_state.gain(index, epoch)
        elif topic == OFFSETS_TOPIC:
            # The journal partition first: the shard's load already writes events to it.
            self.journal.gain(index, epoch)
            self.shards.runtimes[index].gain(epoch)
        else:
            self.topic_logs.spawn_gain(partition, epoch)

    async def on_release(self, partition: tuple[str, int]) -> None:
        topic, index = partition
        if topic == TRANSACTION_STATE_TOPIC:
            await self.transactions.release(index)
        elif topic == SHARE_STATE_TOPIC:
            await self.share_state.release(index)
        elif topic == OFFSETS_TOPIC:
            await self.shards.runtimes[index].release()
            await self.journal.release(index)
        else:
            await self.topic_logs.release(partition)

    def on_lose(self, partition: tuple[str, int]) -> None:
        topic, index = partition
        if topic == TRANSACTION_STATE_TOPIC:
            self.transactions.lose(index)
        elif topic == SHARE_STATE_TOPIC:
            self.share_state.lose(index)
        elif topic == OFFSETS_TOPIC:
            self.shards.runtimes[index].lose()
            self.journal.lose(index)
        else:
            self.topic_logs.lose(partition)
