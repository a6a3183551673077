"""max.connections, max.connections.per.ip and its overrides, and the descriptors kept for the logs,
seen from real sockets: a broker at its maximum answers nobody new until a connection closes, an
address over its maximum is disconnected at once, a dynamic change takes effect on the next
connection, and connections never take the descriptors the logs need."""

from __future__ import annotations

import select
import socket
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kclient.wire_client import WireClient
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from testkit.kcoord import BrokerProcess
from tests.conftest import BrokerFactory
from tests.differential.config_ops import BROKER, DELETE, SET, incremental
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.metrics import scrape

API_VERSIONS = ApiVersionsRequest(client_software_name="limits-test", client_software_version="1")


def connect(port: int, source: str = "127.0.0.1", timeout: float = 30.0) -> WireClient:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    return WireClient.over(sock)


def without_connections(b: BrokerProcess) -> BrokerProcess:
    """Waits until the broker has let go of the connections its start was checked with (each is
    counted until the broker has read its end)."""
    wait_for(lambda: scrape(b.metrics_port).value("kcoord_connections") == 0, 30, "no connection held", step=0.1)
    return b


def served(client: WireClient) -> bool:
    """ApiVersions is answered on this connection."""
    return client.call(18, 3, API_VERSIONS).error_code == 0


def unanswered_for_a_second(client: WireClient) -> bool:
    """Nothing arrives within a second of a request: a broker serving the connection answers
    ApiVersions in milliseconds (a loaded machine can only make this pass wrongly, never fail)."""
    client.send(18, 3, API_VERSIONS)
    readable, _, _ = select.select([client.sock], [], [], 1.0)
    return not readable


def disconnected_unserved(client: WireClient) -> bool:
    with client:
        try:
            client.call(18, 3, API_VERSIONS)
        except ConnectionError:
            return True
        return False


def a_new_connection_served(port: int) -> bool:
    with connect(port) as client:
        try:
            return served(client)
        except ConnectionError:
            return False  # the slot freed is not free yet


def test_a_broker_at_max_connections_serves_a_new_one_once_another_closes(broker_factory: BrokerFactory) -> None:
    b = without_connections(broker_factory({"max.connections": "3"}))
    held = [connect(b.port) for _ in range(3)]
    try:
        wait_for(lambda: scrape(b.metrics_port).value("kcoord_connections") == 3, 30, "three connections held")
        assert all(served(c) for c in held)
        waiting = connect(b.port)  # the kernel completes the handshake; the broker does not accept it
        assert unanswered_for_a_second(waiting)
        wait_for(lambda: "connection.limit_reached" in b.log(), 30, "the limit to be logged")
        metrics = scrape(b.metrics_port)
        assert metrics.value("kcoord_connections_max") == 3
        held.pop().close()
        api_versions = waiting.recv(18, 3, waiting.correlation)
        assert api_versions.error_code == 0
        assert served(waiting)
        assert b.log().count("connection.limit_reached") == 1
        waiting.close()
    finally:
        for c in held:
            c.close()


def test_an_address_over_its_maximum_is_disconnected_at_once(broker_factory: BrokerFactory) -> None:
    b = without_connections(broker_factory({"max.connections.per.ip": "2",
                                            "max.connections.per.ip.overrides": "127.0.0.2:3"}))
    ours = [connect(b.port) for _ in range(2)]
    others = [connect(b.port, "127.0.0.2") for _ in range(3)]
    try:
        assert all(served(c) for c in ours + others)
        assert disconnected_unserved(connect(b.port))
        assert disconnected_unserved(connect(b.port))
        assert disconnected_unserved(connect(b.port, "127.0.0.2"))
        # Another address is not held to theirs.
        with connect(b.port, "127.0.0.3") as third:
            assert served(third)
        assert scrape(b.metrics_port).count("kcoord_connections_rejected_total") == 3
        # One line per address a minute, however often it is turned away.
        assert b.log().count("connection.rejected") == 2
        # A slot freed is a slot to take.
        ours.pop().close()
        wait_for(lambda: a_new_connection_served(b.port), 30, "a connection from 127.0.0.1 served again", step=0.2)
    finally:
        for c in ours + others:
            c.close()


def test_the_limits_change_while_the_broker_runs(broker_factory: BrokerFactory) -> None:
    """IncrementalAlterConfigs of the cluster-wide default: the next connection obeys it, those held
    stay, and deleting it lifts it."""
    b = without_connections(broker_factory())
    with connect(b.port) as admin:
        assert incremental(admin, BROKER, "", ("max.connections.per.ip", SET, "1"))[0]["code"] == 0
        assert disconnected_unserved(connect(b.port))
        assert served(admin)
        assert incremental(admin, BROKER, "", ("max.connections.per.ip.overrides", SET, "127.0.0.1:2"))[0]["code"] == 0
        with connect(b.port) as second:
            assert served(second)
            assert disconnected_unserved(connect(b.port))
        bad = incremental(admin, BROKER, "", ("max.connections.per.ip.overrides", SET, "127.0.0.1"))[0]
        assert bad["code"] == 42 and "Error parsing configuration property" in (bad["message"] or "")
        assert incremental(admin, BROKER, "", ("max.connections.per.ip", DELETE, None),
                           ("max.connections.per.ip.overrides", DELETE, None))[0]["code"] == 0
        extra = [connect(b.port) for _ in range(3)]
        assert all(served(c) for c in extra)
        for c in extra:
            c.close()


class LimitedBroker(BrokerProcess):
    """A broker whose open-files limit is ``nofile``, soft and hard, as an administrator sets it."""

    nofile = 600

    def command(self) -> tuple[list[str], dict[str, str]]:
        args, env = super().command()
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *args], env


def test_connections_leave_the_logs_their_descriptors(tmp_path: Path) -> None:
    """Under an open-files limit of 600, client connections stop at 300 (half of a small limit is
    kept): with all of them held, the broker still creates a topic's 180 files, and a consumer
    connected before commits and reads back its offset."""
    b = LimitedBroker(tmp_path / "data")
    try:
        without_connections(b.start_loaded())
        assert scrape(b.metrics_port).value("kcoord_connections_max") == 300
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "limited", "enable.auto.commit": False})
        held: list[WireClient] = []
        try:
            # The consumer's connections, its coordinator's included, before the broker is full.
            consumer.committed([TopicPartition("under-the-limit", 0)], timeout=30)
            # Up to the cap, each connection is served (however long a loaded machine takes).
            while (scrape(b.metrics_port).value("kcoord_connections") or 0) < 300:
                held.append(connect(b.port))
                assert served(held[-1])
                assert len(held) < 400, "the broker took 400 connections"
            extra = connect(b.port)
            assert unanswered_for_a_second(extra)
            wait_for(lambda: "by=open_files_limit" in b.log(), 30, "the descriptor cap to be logged")
            # 60 partitions: 180 more files for the logs, opened with no connection to spare.
            answer = held[0].call(19, 5, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name="under-the-limit", num_partitions=60, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=30000, validate_only=False))
            assert [t.error_code for t in answer.topics] == [0]
            consumer.commit(offsets=[TopicPartition("under-the-limit", 59, 42)], asynchronous=False)
            [committed] = consumer.committed([TopicPartition("under-the-limit", 59)], timeout=30)
            assert committed.offset == 42
            assert b.proc is not None and b.proc.poll() is None
            assert "flush_failed" not in b.log() and "EMFILE" not in b.log()
            held.pop().close()
            assert extra.recv(18, 3, extra.correlation).error_code == 0
            extra.close()
        finally:
            consumer.close()
            for c in held:
                c.close()
    finally:
        b.kill()


@pytest.mark.parametrize("overrides", [{"max.connections.per.ip": "0"},
                                       {"max.connections.per.ip.overrides": "127.0.0.1:x"}])
def test_bad_limits_stop_the_broker_at_startup(tmp_path: Path, overrides: dict[str, str]) -> None:
    b = BrokerProcess(tmp_path / "data", overrides)
    done = b.run_to_exit(60)
    assert done.returncode != 0
    assert "max.connections.per.ip" in done.stdout + done.stderr
