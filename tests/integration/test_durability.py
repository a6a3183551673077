"""The log is the truth: restarts, kill -9 during commits, damaged segments, Kafka's own byte format."""

from __future__ import annotations

import random
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition

from broker.coordinators.group.core.base.partitioning import partition_for
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.offsets_log import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.messages.sync_group import SyncGroupRequest
from protocol.payloads.consumer_protocol import encode_assignment, encode_subscription
from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for
from tests.integration.helpers.metrics import requests_answered

pytestmark = pytest.mark.timeout(240)


def commit(client: WireClient, group: str, topic: str, partition: int, offset: int, metadata: str = "") -> int:
    resp = client.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[OffsetCommitRequest.Topic(
            name=topic, partitions=[OffsetCommitRequest.Topic.Partition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata)])]))
    return int(resp.topics[0].partitions[0].error_code)


def fetch_offsets(port: int, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    with WireClient("127.0.0.1", port) as c:
        resp = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id=group, topics=None))
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in resp.topics for p in t.partitions}


def describe(port: int, group: str) -> dict[str, Any]:
    with WireClient("127.0.0.1", port) as c:
        g = c.call(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=[group])).groups[0]
    return {"state": g.group_state, "protocol": g.protocol_data, "type": g.protocol_type,
            "members": sorted((m.member_id, m.group_instance_id, m.client_id, m.member_assignment)
                              for m in g.members)}


def form_static_group(port: int, group: str, topic: str, instances: list[str]) -> None:
    """Static members over the raw protocol: join concurrently, the leader assigns, all sync."""
    clients = [WireClient("127.0.0.1", port, client_id=f"cli-{i}") for i in instances]
    sub = encode_subscription(ConsumerProtocolSubscription(topics=[topic]), 0)
    joins: dict[str, Any] = {}

    def join(i: int) -> None:
        joins[instances[i]] = clients[i].call(ApiKey.JoinGroup, 7, JoinGroupRequest(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=5000, member_id="",
            group_instance_id=instances[i], protocol_type="consumer",
            protocols=[JoinGroupRequest.Protocol(name="range", metadata=sub)]))

    threads = [threading.Thread(target=join, args=(i,)) for i in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(j.error_code == 0 for j in joins.values())
    leader = next(j for j in joins.values() if j.leader == j.member_id)
    plan = [SyncGroupRequest.Assignment(member_id=m.member_id, assignment=encode_assignment(
        ConsumerProtocolAssignment(assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
            topic=topic, partitions=[i])]), 0)) for i, m in enumerate(sorted(leader.members, key=lambda m: m.member_id))]
    # The leader first: a follower's SyncGroup waits until the leader's assignment is stored.
    order = sorted(range(len(instances)), key=lambda i: joins[instances[i]] is not leader)
    for i in order:
        inst = instances[i]
        j = joins[inst]
        resp = clients[i].call(ApiKey.SyncGroup, 5, SyncGroupRequest(
            group_id=group, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=inst,
            protocol_type="consumer", protocol_name="range", assignments=plan if j is leader else []))
        assert resp.error_code == 0 and resp.assignment
    for c in clients:
        c.close()


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_groups_and_offsets_survive_restart(broker_factory, how: str) -> None:
    # A short initial delay lets the three static members form one generation together.
    b = broker_factory({"group.initial.rebalance.delay.ms": "1500"})
    create_topic(b.bootstrap, "ledger", 3)
    form_static_group(b.port, "static-group", "ledger", ["a", "b", "c"])
    with WireClient("127.0.0.1", b.port) as c:
        for p in range(3):
            assert commit(c, "simple-group", "ledger", p, 100 * (p + 1), f"meta-{p}") == 0
    before = (describe(b.port, "static-group"), fetch_offsets(b.port, "simple-group"))
    assert before[0]["state"] == "Stable" and len(before[0]["members"]) == 3
    if how == "clean":
        assert b.stop() == 0
    else:
        b.kill()
    b.start()
    b.wait_loaded()
    assert (describe(b.port, "static-group"), fetch_offsets(b.port, "simple-group")) == before


def test_confluent_consumers_resume_and_static_member_rejoins_without_rebalance(broker_factory) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "resume", 2)
    conf = {"session.timeout.ms": 30000}
    members = [ThreadedConsumer(b.bootstrap, "resumers", ["resume"], **conf, **{"group.instance.id": f"s{i}"})
               for i in range(2)]
    try:
        wait_for(lambda: covers_exactly(members, "resume", 2), 40, "assignment")
        for m in members:
            m.commit([TopicPartition(t, p, 41 + p) for t, p in m.held()])
        held = [m.held() for m in members]
        revocations = [m.revocations for m in members]
        assert b.stop() == 0
        b.start()
        b.wait_loaded()
        # The members reconnect on their own; the group was loaded Stable with them in it. Each
        # member fetches a record written after the restart, and the restarted broker answers
        # several heartbeats (every 300 ms from each member): a member it had forgotten would
        # have been told so, and rejoined with a revocation.
        producer = Producer({"bootstrap.servers": b.bootstrap})
        for p in range(2):
            producer.produce("resume", value=b"after-restart", partition=p)
        assert producer.flush(30) == 0
        fetched = [len(m.messages) for m in members]
        wait_for(lambda: all(len(m.messages) > n for m, n in zip(members, fetched))
                 and requests_answered(b.metrics_port, "Heartbeat") >= 6, 60,
                 "each member to fetch a new record and heartbeat the restarted broker",
                 seen=lambda: ([len(m.messages) for m in members], requests_answered(b.metrics_port, "Heartbeat")))
        assert [m.held() for m in members] == held
        assert [m.revocations for m in members] == revocations
        assert fetch_offsets(b.port, "resumers") == {("resume", 0): (41, ""), ("resume", 1): (42, "")}
        assert describe(b.port, "resumers")["state"] == "Stable"
    finally:
        for m in members:
            m.close()


def test_kill_9_while_committing_loses_no_acknowledged_commit(broker_factory) -> None:
    rng = random.Random(7)
    b = broker_factory()
    create_topic(b.bootstrap, "crash", 4)
    for iteration in range(3):
        acked = [-1] * 4
        sent = [-1] * 4
        stop = threading.Event()

        def hammer(p: int, sent: list[int] = sent, acked: list[int] = acked, stop: threading.Event = stop,
                   start: int = (iteration + 1) * 1_000_000) -> None:
            try:
                with WireClient("127.0.0.1", b.port, timeout=5) as c:
                    offset = start
                    while not stop.is_set():
                        offset += 1
                        sent[p] = offset
                        if commit(c, "crashers", "crash", p, offset) == 0:
                            acked[p] = offset
            except (OSError, ConnectionError, AssertionError):
                pass

        threads = [threading.Thread(target=hammer, args=(p,)) for p in range(4)]
        for t in threads:
            t.start()
        # Every partition has had a commit acknowledged (on a loaded machine the first can take
        # longer than any fixed pause), then the kill comes at a random moment of the hammering.
        wait_for(lambda acked=acked: all(a > 0 for a in acked), 60, "a commit acknowledged on every partition",
                 seen=lambda acked=acked: list(acked))
        time.sleep(rng.random())  # the scenario: a random moment of the hammering
        b.kill()
        stop.set()
        for t in threads:
            t.join()
        b.start()
        b.wait_loaded()
        stored = fetch_offsets(b.port, "crashers")
        for p in range(4):
            got = stored[("crash", p)][0]
            assert acked[p] <= got <= sent[p], f"iteration {iteration} partition {p}: {got} vs acked {acked[p]}"


def _partition_dir(data_dir: Path, group: str) -> Path:
    return data_dir / f"__consumer_offsets-{partition_for(group)}"


@pytest.mark.parametrize("damage", ["truncate-mid-batch", "flip-byte-in-last-batch", "delete-index"])
def test_damaged_log_is_repaired_and_earlier_commits_survive(broker_factory, damage: str) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "fragile", 10)
    with WireClient("127.0.0.1", b.port) as c:
        for p in range(10):
            assert commit(c, "fragile-group", "fragile", p, 500 + p) == 0
    assert b.stop() == 0
    segment = _partition_dir(b.data_dir, "fragile-group") / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    # Each commit above is one batch; find where the last one starts.
    pos, last = 0, 0
    while pos < len(data):
        last = pos
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    if damage == "truncate-mid-batch":
        segment.write_bytes(data[: last + 30])
    elif damage == "flip-byte-in-last-batch":
        data[len(data) - 5] ^= 0xFF
        segment.write_bytes(bytes(data))
    else:
        segment.with_suffix(".index").unlink()
    b.start()
    b.wait_loaded()
    stored = fetch_offsets(b.port, "fragile-group")
    expected = {("fragile", p): (500 + p, "") for p in range(10)}
    if damage != "delete-index":
        del expected[("fragile", 9)]
        assert "log.recovered" in b.log() and "dropped_bytes" in b.log()
    assert stored == expected
    with WireClient("127.0.0.1", b.port) as c:  # and it keeps serving writes
        assert commit(c, "fragile-group", "fragile", 9, 999) == 0
    assert fetch_offsets(b.port, "fragile-group")[("fragile", 9)] == (999, "")


def test_kafka_python_reads_the_batches_kcoord_writes(broker) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    create_topic(broker.bootstrap, "fmt", 1)
    with WireClient("127.0.0.1", broker.port) as c:
        assert commit(c, "fmt-group", "fmt", 0, 12345, "hello") == 0
    form_static_group(broker.port, "fmt-group2", "fmt", ["x"])  # one member: no need to wait for others
    seen = []
    for group in ("fmt-group", "fmt-group2"):
        data = (_partition_dir(broker.data_dir, group) / "00000000000000000000.log").read_bytes()
        pos = 0
        while pos < len(data):
            size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
            batch = DefaultRecordBatch(data[pos : pos + size])
            assert batch.validate_crc()
            for rec in batch:
                version = struct.unpack_from(">h", rec.key, 0)[0]
                if version == 1:
                    key = OffsetCommitKey.decode(rec.key[2:], 1)
                    value = OffsetCommitValue.decode(rec.value[2:], struct.unpack_from(">h", rec.value, 0)[0])
                    seen.append(("offset", key.group, key.topic, key.partition, value.offset, value.metadata))
                elif version == 2:
                    key = GroupMetadataKey.decode(rec.key[2:], 2)
                    value = GroupMetadataValue.decode(rec.value[2:], struct.unpack_from(">h", rec.value, 0)[0])
                    seen.append(("group", key.group, value.protocol_type, len(value.members)))
            pos += size
    assert ("offset", "fmt-group", "fmt", 0, 12345, "hello") in seen
    assert ("group", "fmt-group2", "consumer", 1) in seen


def test_segments_written_by_another_implementation_load(broker_factory, tmp_path: Path) -> None:
    """A Kafka-format segment built with kafka-python's batch builder (as a Kafka broker's data dir
    would hold it) loads: its offsets and group show up through OffsetFetch and DescribeGroups."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    data_dir = tmp_path / "kafka-data"
    group = "imported"
    pdir = data_dir / f"__consumer_offsets-{partition_for(group)}"
    pdir.mkdir(parents=True)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    now = int(time.time() * 1000)
    member = GroupMetadataValue.MemberMetadata(
        member_id="consumer-1-abc", group_instance_id=None, client_id="consumer-1", client_host="/10.0.0.7",
        rebalance_timeout=300000, session_timeout=45000,
        subscription=encode_subscription(ConsumerProtocolSubscription(topics=["imported-topic"]), 0),
        assignment=encode_assignment(ConsumerProtocolAssignment(assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic="imported-topic", partitions=[0])]), 0))
    group_value = GroupMetadataValue(protocol_type="consumer", generation=4, protocol="range",
                                     leader="consumer-1-abc", current_state_timestamp=now, members=[member])
    records = [
        (struct.pack(">h", 1) + OffsetCommitKey.encode(OffsetCommitKey(group=group, topic="imported-topic",
                                                                        partition=0), 1),
         struct.pack(">h", 3) + OffsetCommitValue.encode(OffsetCommitValue(
             offset=777, leader_epoch=2, metadata="from-kafka", commit_timestamp=now), 3)),
        (struct.pack(">h", 2) + GroupMetadataKey.encode(GroupMetadataKey(group=group), 2),
         struct.pack(">h", 3) + GroupMetadataValue.encode(group_value, 3)),
    ]
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=now, key=key, value=value, headers=[])
    (pdir / "00000000000000000000.log").write_bytes(bytes(builder.build()))

    b = broker_factory(data_dir=data_dir, start=False)
    b.start()
    b.wait_loaded()
    create_topic(b.bootstrap, "imported-topic", 1)
    assert fetch_offsets(b.port, group) == {("imported-topic", 0): (777, "from-kafka")}
    desc = describe(b.port, group)
    assert desc["state"] == "Stable" and desc["protocol"] == "range"
    assert [(m[0], m[2]) for m in desc["members"]] == [("consumer-1-abc", "consumer-1")]
