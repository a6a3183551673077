"""Prometheus metrics. Counters and histograms are updated on the request path; gauges that
describe state (groups by state, log sizes) are read from the broker when Prometheus scrapes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.observability.loop_metrics import LoopMetrics

# Each counter and histogram would also export a `<name>_created` gauge: a second series per label set
# that Prometheus stores and no dashboard or alert reads (rate() copes with restarts on its own).
disable_created_metrics()

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0, 30.0)
_FLUSH_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class Metrics:
    def __init__(self) -> None:
        # Updated for every request, on the event loop only: lock-free (broker/loop_metrics.py).
        loop = LoopMetrics()
        REGISTRY.register(loop)
        self.requests = loop.counter("kcoord_requests", "Requests received, by API and version.", ["api", "version"])
        self.request_seconds = loop.histogram("kcoord_request_duration_seconds",
                                              "Time from a request's arrival to its response being sent, by API.",
                                              ["api"], buckets=_LATENCY_BUCKETS)
        self.request_errors = Counter("kcoord_request_errors",
                                      "Responses carrying an error, by API and error name (the top-level error "
                                      "code, or the first per-partition/topic/group one where the API has none).",
                                      ["api", "error"])
        self.connections = Gauge("kcoord_connections", "Open client connections.")
        self.connections_opened = Counter("kcoord_connections_opened", "Client connections accepted.")
        self.connections_rejected = Counter("kcoord_connections_rejected",
                                            "Client connections closed as soon as they were accepted because "
                                            "their address held max.connections.per.ip (or its override).")
        self.connections_max = Gauge("kcoord_connections_max",
                                     "The most client connections held at once: max.connections, or the "
                                     "open-files limit less the descriptors kept for the logs if that is lower.")
        self.connections_closed_bad = Counter("kcoord_connections_closed_bad_request",
                                              "Connections closed because of a request that could not be served.",
                                              ["reason"])
        self.authentications = Counter("kcoord_authentications",
                                       "SASL and TLS client authentications, by mechanism (PLAIN, SCRAM-SHA-256, "
                                       "SCRAM-SHA-512, SSL) and result (success, failure).",
                                       ["mechanism", "result"])
        self.authorization_denials = Counter("kcoord_authorization_denials",
                                             "Operations the authorizer denied, by API and resource type.",
                                             ["api", "resource_type"])
        self.fetch_session_evictions = Counter("kcoord_fetch_session_evictions",
                                               "Incremental fetch sessions evicted to make room for a new one "
                                               "(max.incremental.fetch.session.cache.slots).")
        self.bytes_in = loop.counter("kcoord_received_bytes", "Bytes received from clients.")
        self.bytes_out = loop.counter("kcoord_sent_bytes", "Bytes sent to clients.")
        self.send_worker_answers = loop.counter("kcoord_send_worker_answers",
                                                "Answers handed to the send worker to write: those of a busy "
                                                "node (socket.send.worker.min.round).")
        self.group_events = Counter("kcoord_group_events", "Rebalance-journal events written to "
                                    "__kcoord_group_events.")
        self.rebalances = Counter("kcoord_rebalances", "Rebalances started, by reason.", ["reason"])
        self.share_dead_letters = Counter("kcoord_share_dead_letter_records",
                                          "Records a share group sent to its dead-letter queue (KIP-1191).",
                                          ["group"])
        self.share_dead_letter_failures = Counter("kcoord_share_dead_letter_failures",
                                                  "Records a share group could not send to its dead-letter queue "
                                                  "(they stay archived).", ["group"])
        self.rebalance_seconds = Histogram("kcoord_rebalance_duration_seconds",
                                           "Time from a rebalance starting to the group becoming Stable.",
                                           buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
        self.offset_commits = loop.counter("kcoord_offset_commits", "Partition offsets committed.")
        self.consumer_assignments = Counter("kcoord_consumer_group_assignments",
                                            "Target assignments computed for KIP-848 consumer groups, by assignor.",
                                            ["assignor"])
        self.consumer_assignment_seconds = Histogram(
            "kcoord_consumer_group_assignment_seconds",
            "Time of the heartbeat operations that computed a consumer group's target assignment.",
            buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))
        self.consumer_epoch_bumps = Counter("kcoord_consumer_group_epoch_bumps",
                                            "Group epochs bumped in KIP-848 consumer groups (membership, "
                                            "subscription or subscribed-topic changes).")
        self.offset_expirations = Counter("kcoord_offset_expirations", "Partition offsets expired by retention.")
        self.transactions_committed = Counter("kcoord_transactions_committed",
                                              "Transactions completed with CompleteCommit (markers written).")
        self.transactions_aborted = Counter("kcoord_transactions_aborted",
                                            "Transactions completed with CompleteAbort (markers written).")
        self.transactions_timed_out = Counter("kcoord_transactions_timed_out",
                                              "Transactions the coordinator aborted for exceeding their timeout.")
        self.transactional_ids_expired = Counter("kcoord_transactional_ids_expired",
                                                 "Transactional ids forgotten after transactional.id.expiration.ms "
                                                 "without a transaction.")
        self.flush_seconds = Histogram("kcoord_log_flush_seconds",
                                       "Time to write and fdatasync one group-commit batch.",
                                       buckets=_FLUSH_BUCKETS)
        self.flush_records = Histogram("kcoord_log_flush_records", "Records per group-commit flush.",
                                       buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096))
        self.load_seconds = Gauge("kcoord_shard_load_duration_seconds",
                                  "Time the last load (replay) of a __consumer_offsets partition took.",
                                  ["partition"])
        self.load_records = Gauge("kcoord_shard_load_records",
                                  "Records the last load of a __consumer_offsets partition read, from its replay "
                                  "snapshot (source=snapshot) and from the log after it (source=log).",
                                  ["partition", "source"])
        self.snapshots_written = Counter("kcoord_replay_snapshots_written",
                                         "Replay snapshots written (in the background and at shutdown).")
        self.compactions = Counter("kcoord_log_compactions", "Compaction runs that rewrote segments.")
        self.compaction_reclaimed = Counter("kcoord_log_compaction_reclaimed_bytes",
                                            "Bytes removed from the log by compaction.")
        self.write_failures = Counter("kcoord_log_write_failures", "Log writes (appends or flushes) that failed.")
        # Cluster mode (etcd.endpoints set); they stay at zero on a single node.
        self.cluster_nodes = Gauge("kcoord_cluster_nodes", "Live nodes this node sees registered in etcd.")
        self.cluster_partitions_owned = Gauge("kcoord_cluster_partitions_owned",
                                              "Partitions (__consumer_offsets and topics) this node owns.")
        self.cluster_lease_renewals = Counter("kcoord_cluster_lease_renewals", "Lease renewals etcd accepted.")
        self.cluster_lease_failures = Counter("kcoord_cluster_lease_failures",
                                              "Lease renewals that failed or found the lease expired.")
        self.cluster_takeovers = Counter("kcoord_cluster_takeovers", "Partitions this node claimed in etcd.")
        self.cluster_takeover_load_seconds = Histogram(
            "kcoord_cluster_takeover_load_seconds",
            "From claiming a __consumer_offsets partition to serving it (open, recovery, replay).",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


METRICS = Metrics()


class StateCollector(Collector):
    """Gauges computed at scrape time from a callable returning (name, help, labels, samples)."""

    def __init__(self, source: Callable[[], Iterable[tuple[str, str, list[str], list[tuple[list[str], float]]]]]) -> None:
        self.source = source

    def collect(self) -> Iterable[Any]:
        for name, doc, labels, samples in self.source():
            family = GaugeMetricFamily(name, doc, labels=labels)
            for values, value in samples:
                family.add_metric(values, value)
            yield family


_state_collector: StateCollector | None = None


def install_state_collector(source: Callable[[], Any]) -> None:
    """Points the scrape-time gauges at the running broker (replacing any earlier one)."""
    global _state_collector
    if _state_collector is not None:
        REGISTRY.unregister(_state_collector)
    _state_collector = StateCollector(source)
    REGISTRY.register(_state_collector)
