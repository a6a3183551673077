"""What `/metrics` says after real traffic is what happened: requests, errors, connections, groups,
offsets and the offsets log, as a user reads them; the Metrics table of docs/operations.md names exactly the
families the broker exports; `kcoord health` tells a loaded broker from a closed port."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from broker.coordinators.group.core.base.partitioning import partition_for
from kclient.dump_log import dump_file
from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sync_group import SyncGroupRequest
from testkit.kcoord import ROOT, BrokerProcess
from testkit.ports import free_port
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, wait_for
from tests.integration.helpers.metrics import Scrape, scrape

pytestmark = pytest.mark.timeout(120)

NUM_PARTITIONS = 50






def wait_scrape(port: int, check: Callable[[Scrape], bool], what: str, timeout: float = 60.0) -> Scrape:
    """The first scrape ``check`` holds of."""
    scrapes = [scrape(port)]

    def holds() -> bool:
        if check(scrapes[-1]):
            return True
        scrapes.append(scrape(port))
        return False

    wait_for(holds, timeout, what)
    return scrapes[-1]


def _log_files(data_dir: Path, partition: int) -> list[Path]:
    return sorted((data_dir / f"__consumer_offsets-{partition}").glob("*.log"))


# ---- requests, errors, connections ---------------------------------------------------------------


def test_requests_errors_connections_and_bytes_count_what_clients_sent(broker: BrokerProcess) -> None:
    before = wait_scrape(broker.metrics_port, lambda s: s.value("kcoord_connections") == 0,
                         "the fixture's probes to disconnect")
    with WireClient("127.0.0.1", broker.port) as c:
        for _ in range(3):
            assert c.call(ApiKey.ApiVersions, 1, ApiVersionsRequest()).error_code == 0
        asked = time.monotonic()
        hb = c.call(ApiKey.Heartbeat, 3, HeartbeatRequest(group_id="nobody-home", generation_id=1,
                                                          member_id="ghost", group_instance_id=None))
        round_trip = time.monotonic() - asked
        assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        after = scrape(broker.metrics_port)
        assert after.value("kcoord_connections") == 1

    delta = after.count("kcoord_requests_total", api="ApiVersions", version="1") - \
        before.count("kcoord_requests_total", api="ApiVersions", version="1")
    assert delta == 3
    assert after.count("kcoord_requests_total", api="Heartbeat", version="3") == 1
    assert after.count("kcoord_request_errors_total", api="Heartbeat", error="UNKNOWN_MEMBER_ID") == 1
    # Successful answers are not errors.
    assert "NONE" not in after.by_label("kcoord_request_errors_total", "error")
    latency = after.count("kcoord_request_duration_seconds_count", api="ApiVersions") - \
        before.count("kcoord_request_duration_seconds_count", api="ApiVersions")
    assert latency == 3
    assert after.count("kcoord_request_duration_seconds_count", api="Heartbeat") == 1
    # In seconds, and within the client's round trip (the broker's clock runs inside it).
    assert 0 < after.count("kcoord_request_duration_seconds_sum", api="Heartbeat") <= round_trip
    assert after.count("kcoord_request_duration_seconds_bucket", api="Heartbeat", le="+Inf") == 1
    assert after.count("kcoord_received_bytes_total") > before.count("kcoord_received_bytes_total")
    assert after.count("kcoord_sent_bytes_total") > before.count("kcoord_sent_bytes_total")

    # The gauge counts connections that are open now.
    wait_scrape(broker.metrics_port, lambda s: s.value("kcoord_connections") == 0, "the connection to close")
    with WireClient("127.0.0.1", broker.port) as a, WireClient("127.0.0.1", broker.port) as b:
        a.call(ApiKey.ApiVersions, 1, ApiVersionsRequest())
        b.call(ApiKey.ApiVersions, 1, ApiVersionsRequest())
        assert scrape(broker.metrics_port).value("kcoord_connections") == 2
    wait_scrape(broker.metrics_port, lambda s: s.value("kcoord_connections") == 0, "the connections to close")

    # A frame larger than socket.request.max.bytes closes the connection and is counted once.
    opened = scrape(broker.metrics_port).count("kcoord_connections_opened_total")
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall((2**31 - 1).to_bytes(4, "big"))
        assert s.recv(16) == b""
    final = wait_scrape(broker.metrics_port,
                        lambda s: s.count("kcoord_connections_closed_bad_request_total", reason="frame_size") == 1,
                        "the bad frame to be counted")
    assert final.count("kcoord_connections_opened_total") == opened + 1


def test_offset_commit_partition_errors_are_counted_per_response(broker: BrokerProcess) -> None:
    """OffsetCommit has no top-level error code: a response is an error by its partitions' codes,
    which is what the commit-failure alert divides by the commit request rate."""
    create_topic(broker.bootstrap, "known", 1)

    def commit(c: WireClient, topic: str, metadata: str = "") -> int:
        resp = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
            group_id="erring-group", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.Topic(name=topic, partitions=[
                    OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1,
                                                        committed_metadata=metadata)])]))
        return int(resp.topics[0].partitions[0].error_code)

    with WireClient("127.0.0.1", broker.port) as c:
        assert commit(c, "known") == 0
        assert commit(c, "no-such-topic") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(c, "no-such-topic") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(c, "known", "m" * 5000) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    s = scrape(broker.metrics_port)
    assert s.count("kcoord_requests_total", api="OffsetCommit", version="8") == 4
    assert {labels["error"]: v for labels, v in s.samples["kcoord_request_errors_total"]
            if labels["api"] == "OffsetCommit"} == {"UNKNOWN_TOPIC_OR_PARTITION": 2, "OFFSET_METADATA_TOO_LARGE": 1}
    assert s.count("kcoord_offset_commits_total") == 1


# ---- groups, offsets and the offsets log ---------------------------------------------------------


def test_group_offset_and_log_metrics_follow_a_real_consumer_group(broker: BrokerProcess) -> None:
    group, topic = "metered-group", "metered"
    partition = partition_for(group, NUM_PARTITIONS)
    create_topic(broker.bootstrap, topic, 2)
    consumer = ThreadedConsumer(broker.bootstrap, group, [topic])
    try:
        wait_for(lambda: consumer.held() == {(topic, 0), (topic, 1)}, 30, "the consumer's assignment")
        up = wait_scrape(broker.metrics_port, lambda s: s.value("kcoord_groups", state="Stable") == 1,
                         "the group to be Stable")
        assert up.value("kcoord_group_members") == 1
        assert up.by_label("kcoord_groups", "state") == {
            "Stable": 1, "Empty": 0, "PreparingRebalance": 0, "CompletingRebalance": 0, "Dead": 0}
        assert up.value("kcoord_parked_requests", kind="join") == 0
        assert up.value("kcoord_parked_requests", kind="sync") == 0
        assert up.count("kcoord_rebalances_total", reason="member-joined") == 1
        assert up.count("kcoord_rebalance_duration_seconds_count") == 1
        # librdkafka joins twice: the first JoinGroup is told MEMBER_ID_REQUIRED (KIP-394).
        joins = sum(v for labels, v in up.samples["kcoord_requests_total"] if labels["api"] == "JoinGroup")
        assert joins == 2
        assert up.count("kcoord_request_errors_total", api="JoinGroup", error="MEMBER_ID_REQUIRED") == 1

        consumer.commit([TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)])
        committed = scrape(broker.metrics_port)
        assert committed.count("kcoord_offset_commits_total") == 2
        assert committed.value("kcoord_offsets") == 2
        assert committed.count("kcoord_log_flush_seconds_count") > 0
        assert committed.count("kcoord_log_flush_records_count") > 0
        assert committed.count("kcoord_log_flush_records_sum") >= 3  # group metadata + two commits
        assert committed.count("kcoord_request_duration_seconds_count", api="OffsetCommit") == 1
        assert committed.count("kcoord_log_write_failures_total") == 0

        # Per-partition log gauges agree with the files on disk.
        files = _log_files(broker.data_dir, partition)
        assert committed.value("kcoord_log_segments", partition=str(partition)) == len(files) == 1
        assert committed.value("kcoord_log_size_bytes", partition=str(partition)) == files[0].stat().st_size > 0
        batches = list(dump_file(files[0]))
        assert committed.value("kcoord_log_end_offset", partition=str(partition)) == batches[-1]["lastOffset"] + 1
        other = (partition + 1) % NUM_PARTITIONS
        assert committed.value("kcoord_log_end_offset", partition=str(other)) == 0
        assert committed.value("kcoord_log_size_bytes", partition=str(other)) == 0
    finally:
        consumer.close()

    gone = wait_scrape(broker.metrics_port, lambda s: s.value("kcoord_groups", state="Empty") == 1,
                       "the group to be Empty after its member left")
    assert gone.value("kcoord_groups", state="Stable") == 0
    assert gone.value("kcoord_group_members") == 0
    assert gone.count("kcoord_rebalances_total", reason="member-left") == 1
    assert gone.value("kcoord_offsets") == 2


def test_expired_offsets_are_counted_and_leave_the_offsets_gauge(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"offsets.retention.check.interval.ms": "200"})
    create_topic(b.bootstrap, "short-lived", 2)
    with WireClient("127.0.0.1", b.port) as c:
        # OffsetCommit v2 carries its own retention time: these expire after 300 ms.
        resp = c.call(ApiKey.OffsetCommit, 2, OffsetCommitRequest(
            group_id="short-group", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=300,
            topics=[OffsetCommitRequest.Topic(name="short-lived", partitions=[
                OffsetCommitRequest.Topic.Partition(partition_index=p, committed_offset=10, committed_metadata="")
                for p in range(2)])]))
        assert [p.error_code for p in resp.topics[0].partitions] == [0, 0]
    assert scrape(b.metrics_port).value("kcoord_offsets") == 2
    expired = wait_scrape(b.metrics_port, lambda s: s.count("kcoord_offset_expirations_total") == 2,
                          "two offsets to expire")
    assert expired.value("kcoord_offsets") == 0
    assert expired.count("kcoord_offset_commits_total") == 2


def test_compaction_runs_and_reclaimed_bytes_are_counted(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"offsets.topic.segment.bytes": "4096", "log.cleaner.backoff.ms": "100",
                        "log.cleaner.min.cleanable.ratio": "0.1"})
    create_topic(b.bootstrap, "churn", 1)
    partition = partition_for("churn-group", NUM_PARTITIONS)
    label = str(partition)
    with WireClient("127.0.0.1", b.port) as c:
        for offset in range(1, 201):  # the same key over and over: all but the last are garbage
            resp = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
                group_id="churn-group", generation_id_or_member_epoch=-1, member_id="", topics=[
                    OffsetCommitRequest.Topic(name="churn", partitions=[
                        OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=offset,
                                                            committed_metadata="x" * 40)])]))
            assert resp.topics[0].partitions[0].error_code == 0
    compacted = wait_scrape(b.metrics_port, lambda s: s.count("kcoord_log_compactions_total") >= 1
                            and s.count("kcoord_log_compaction_reclaimed_bytes_total") > 0,
                            "a compaction run", timeout=30)
    assert compacted.count("kcoord_offset_commits_total") == 200
    assert compacted.value("kcoord_log_end_offset", partition=label) == 200

    def disk_bytes() -> int:
        try:
            return sum(f.stat().st_size for f in _log_files(b.data_dir, partition))
        except FileNotFoundError:
            return 1 << 62  # the cleaner swapped a segment between the listing and the stat: look again

    def gauges_match_files(s: Scrape) -> bool:
        # Gauges and files are read together: a later pass may merge segments after this scrape.
        return (s.value("kcoord_log_size_bytes", partition=label) == disk_bytes()
                and s.value("kcoord_log_segments", partition=label) == len(_log_files(b.data_dir, partition)))

    # The cleaner may have run while commits were still arriving: wait for the pass that catches up,
    # after which the log holds a fraction of what was written and the gauges match the files.
    wait_scrape(b.metrics_port, lambda s: disk_bytes() < 200 * 100 and gauges_match_files(s),
                "compaction to reclaim most of what was written, with gauges that match the files", timeout=30)


# ---- startup, process ----------------------------------------------------------------------------


def test_startup_load_and_process_metrics(broker: BrokerProcess) -> None:
    s = scrape(broker.metrics_port)
    assert s.value("kcoord_shards_loading") == 0
    loads = s.by_label("kcoord_shard_load_duration_seconds", "partition")
    assert set(loads) == {str(p) for p in range(NUM_PARTITIONS)}
    assert all(0 <= v < 30 for v in loads.values())
    for gauge in ("kcoord_log_segments", "kcoord_log_end_offset", "kcoord_log_size_bytes"):
        assert set(s.by_label(gauge, "partition")) == set(loads), gauge
    assert s.by_label("kcoord_log_segments", "partition")["0"] == 1
    assert (s.value("process_resident_memory_bytes") or 0) > 1_000_000
    assert (s.value("process_open_fds") or 0) > 0
    assert s.value("process_cpu_seconds_total") is not None
    assert s.value("process_start_time_seconds") is not None
    # Once loaded, the broker collects and freezes what startup made (broker/heap.py): that is one
    # full collection, timed like every other.
    settled = wait_scrape(broker.metrics_port, lambda s: s.count("kcoord_gc_pause_seconds_count", generation="2") >= 1,
                          "the startup heap to be collected and frozen")
    assert settled.count("kcoord_gc_pause_seconds_sum", generation="2") > 0


# ---- the documentation is the contract -------------------------------------------------------------


def documented_metrics() -> dict[str, set[str]]:
    """Metric family -> label names, from the Metrics table of docs/operations.md."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Metrics", 1)[1].split("\n## ", 1)[0]
    out: dict[str, set[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `kcoord_"):
            continue
        names_cell = line.split("|")[1]
        for name, labels in re.findall(r"`(kcoord_\w+)(?:\{([\w,]*)\})?`", names_cell):
            out[name] = set(filter(None, labels.split(",")))
    return out


def _exercise_every_labelled_family(broker: BrokerProcess) -> None:
    """Traffic that gives each labelled family at least one sample: a group that rebalances, an
    error response and a connection closed for a bad frame."""
    with WireClient("127.0.0.1", broker.port) as c:
        join = c.call(ApiKey.JoinGroup, 3, JoinGroupRequest(
            group_id="readme-group", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"")]))
        assert join.error_code == 0
        sync = c.call(ApiKey.SyncGroup, 2, SyncGroupRequest(
            group_id="readme-group", generation_id=join.generation_id, member_id=join.member_id,
            assignments=[SyncGroupRequest.Assignment(member_id=join.member_id, assignment=b"")]))
        assert sync.error_code == 0
        hb = c.call(ApiKey.Heartbeat, 0, HeartbeatRequest(group_id="readme-group", generation_id=99,
                                                          member_id=join.member_id))
        assert hb.error_code == ErrorCode.ILLEGAL_GENERATION
        joined = c.call(ApiKey.ConsumerGroupHeartbeat, 0, ConsumerGroupHeartbeatRequest(
            group_id="readme-consumer-group", member_id="", member_epoch=0, rebalance_timeout_ms=10_000,
            subscribed_topic_names=["readme-topic"], topic_partitions=[]))
        # Kafka 4.4 starts a new consumer group at epoch 1, so its first member joins at epoch 2.
        assert (joined.error_code, joined.member_epoch) == (0, 2)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(b"\xff\xff\xff\xff")
        assert s.recv(16) == b""


def _exercise_security_families(broker: BrokerProcess, sasl_port: int) -> None:
    """A SASL login (an authentication), an ACL denying the anonymous principal one group, and a
    JoinGroup of that group (an authorization denial)."""
    from protocol.messages.create_acls import CreateAclsRequest
    from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from protocol.messages.sasl_handshake import SaslHandshakeRequest

    with WireClient("127.0.0.1", sasl_port) as c:
        assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=b"\0ops\0ops-secret")) \
            .error_code == 0
        deny = CreateAclsRequest.AclCreation(resource_type=3, resource_name="readme-denied", resource_pattern_type=3,
                                             principal="User:ANONYMOUS", host="*", operation=3, permission_type=2)
        assert c.call(ApiKey.CreateAcls, 3, CreateAclsRequest(creations=[deny])).results[0].error_code == 0
    with WireClient("127.0.0.1", broker.port) as c:
        join = c.call(ApiKey.JoinGroup, 3, JoinGroupRequest(
            group_id="readme-denied", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"")]))
        assert join.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


# Per-group share-partition families: a sample needs a share consumer holding records, which
# tests/integration/share/test_share_consumer.py drives and reads these series from (the lag:
# tests/integration/share/test_share_group_configs.py).
# Likewise the client-quota families: a sample needs a quota set and a client held to it, which
# tests/integration/test_client_quotas.py drives and reads these series from.
SAMPLED_BY_SHARE_TESTS = {"kcoord_share_records_in_flight", "kcoord_share_redeliveries", "kcoord_share_lock_expiries",
                          "kcoord_share_archived_at_delivery_limit", "kcoord_share_group_lag",
                          "kcoord_share_dead_letter_records_total", "kcoord_share_dead_letter_failures_total"}
SAMPLED_BY_QUOTA_TESTS = {"kcoord_quota_rate", "kcoord_quota_bound", "kcoord_quota_throttle_time_ms_total",
                          "kcoord_quota_throttled_responses_total", "kcoord_quota_connection_creation_rate",
                          "kcoord_quota_connections_throttled_total"}


def test_documented_metrics_table_names_exactly_what_the_broker_exports(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    documented = documented_metrics()
    assert len(documented) >= 25, "the Metrics table of docs/operations.md was not found"
    # Authorization on, allowing everything no ACL names: the ordinary traffic is served as before.
    sasl_port = free_port()
    broker = broker_factory(start=False)
    broker.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": "", "sasl.bootstrap.users": "ops:ops-secret",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    broker.start()
    broker.wait_loaded()
    _exercise_every_labelled_family(broker)
    _exercise_security_families(broker, sasl_port)
    s = wait_scrape(broker.metrics_port, lambda s: s.count("kcoord_rebalance_duration_seconds_count") == 1
                    and bool(s.samples.get("kcoord_connections_closed_bad_request_total")),
                    "the group to settle and the bad connection to be counted")
    exported = {name for name in s.types if name.startswith("kcoord_")}
    assert sorted(exported - set(documented)) == [], "exported but not in docs/operations.md"
    assert sorted(set(documented) - exported) == [], "in docs/operations.md but not exported"
    for name, labels in documented.items():
        suffix = "_bucket" if s.types[name] == "histogram" else ""
        series = s.samples.get(name + suffix, [])
        if name in SAMPLED_BY_SHARE_TESTS | SAMPLED_BY_QUOTA_TESTS and not series:
            continue
        assert series, f"{name} has no samples after traffic that should produce them"
        for got, _ in series:
            assert set(got) - {"le"} == labels, f"{name}: labels {sorted(got)} vs docs/operations.md {sorted(labels)}"
    assert s.types["kcoord_requests_total"] == "counter"
    assert s.types["kcoord_request_duration_seconds"] == "histogram"
    assert s.types["kcoord_groups"] == "gauge"
    # No per-series creation timestamps: they double the series count and nothing reads them.
    assert not [n for n in s.samples if n.startswith("kcoord_") and n.endswith("_created")]


# ---- kcoord health ------------------------------------------------------------------------------


def _health(bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kcoord", "health", "--bootstrap", bootstrap,
                           "--timeout", "3"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


def test_health_is_zero_for_a_loaded_broker_and_not_for_a_closed_port(broker: BrokerProcess) -> None:
    ok = _health(broker.bootstrap)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip() == "healthy: node 1, 1 live node(s), owns 50 of 50 __consumer_offsets partitions"

    closed = _health(f"127.0.0.1:{free_port()}")
    assert closed.returncode != 0
    assert closed.stdout.startswith("unhealthy:")
    assert "refused" in closed.stdout.lower()
    assert "Traceback" not in closed.stderr
