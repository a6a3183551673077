"""Real clients bootstrap against `kcoord serve`: metadata, topic admin, cluster description."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(120)


def test_confluent_admin_lists_creates_and_describes(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert [b.id for b in md.brokers.values()] == [1]
    assert "__consumer_offsets" in md.topics
    assert len(md.topics["__consumer_offsets"].partitions) == 50

    futures = admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=1)])
    futures["orders"].result(10)
    again = admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=1)])
    with pytest.raises(Exception, match="already exists"):
        again["orders"].result(10)
    md = admin.list_topics(timeout=10)
    assert len(md.topics["orders"].partitions) == 6

    cluster = admin.describe_cluster().result(10)
    assert cluster.cluster_id and [n.id for n in cluster.nodes] == [1]
    assert cluster.controller.id == 1

    admin.delete_topics(["orders"])["orders"].result(10)
    assert "orders" not in admin.list_topics(timeout=10).topics


def test_topics_survive_restart(broker_factory, tmp_path) -> None:
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("kept", 3, 1)])["kept"].result(10)
    assert b.stop() == 0
    b.start()
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
    assert len(md.topics["kept"].partitions) == 3


def test_kafka_python_admin(broker) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([KNewTopic("kp-topic", 2, 1)])
        assert "kp-topic" in admin.list_topics()
        assert admin.describe_cluster()["cluster_id"]
    finally:
        admin.close()


async def _aiokafka_bootstrap(bootstrap: str) -> set[str]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        metadata = await producer.client.fetch_all_metadata()
        return set(metadata.topics(exclude_internal_topics=False))
    finally:
        await producer.stop()


def test_aiokafka_bootstrap(broker) -> None:
    import asyncio

    topics = asyncio.run(_aiokafka_bootstrap(broker.bootstrap))
    assert "__consumer_offsets" in topics


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by the test command")
def test_kcat_lists_metadata(broker) -> None:
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "1 brokers:" in out.stdout
    assert 'topic "__consumer_offsets" with 50 partitions' in out.stdout


def test_installed_kcoord_command_serves_from_any_directory(tmp_path) -> None:
    """The `kcoord` the install put beside the interpreter, run from outside the checkout with no
    PYTHONPATH, imports every package it needs and serves: what `scripts/run.sh` starts."""
    import os
    import sys
    from pathlib import Path

    from testkit.ports import api_versions_ok, free_port
    from tests.integration.helpers.cluster import wait_for

    command = Path(sys.executable).parent / "kcoord"
    if not command.exists():
        pytest.skip("kcoord is not installed beside this interpreter (scripts/setup.sh installs it)")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("KCOORD_")}
    with open(tmp_path / "kcoord.log", "wb") as log:
        proc = subprocess.Popen([str(command), "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                 "--override", f"log.dirs={tmp_path / 'data'}", "--override", "metrics.listener="],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def serving() -> bool:
            assert proc.poll() is None, (tmp_path / "kcoord.log").read_text(errors="replace")[-2000:]
            return api_versions_ok(port)

        wait_for(serving, 120, "kcoord serve to listen", step=0.1)
    finally:
        proc.terminate()
        assert proc.wait(15) == 0
