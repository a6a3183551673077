"""Fixtures of the differential tests: the session's Apache Kafka (from tests/conftest.py), one
kcoord broker for the whole folder configured like it, and the pair, ready to serve groups and
transactions (Kafka creates and loads its internal topics on first use: the harness waits for
that once, here, so that no scenario has to hide a coordinator error)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from testkit.kafka import OAUTHBEARER_JAAS, SASL_USERS, TOKEN_SECRET, TOPOLOGY_DESCRIPTION_PLUGIN
from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.differential.harness import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    Pair,
    Target,
    keys_covering,
    retry,
)

# Settings both brokers run with where a test needs them explicit (both are also Kafka's defaults).
KCOORD_SETTINGS = {
    "offset.metadata.max.bytes": "4096",
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    **TOPOLOGY_DESCRIPTION_PLUGIN,
}
NOT_READY = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
TRANSACTIONAL_ID_NOT_FOUND = 105


def wait_ready(port: int) -> None:
    """Waits until every partition of __consumer_offsets and __transaction_state is loaded."""
    groups = keys_covering("ready-group")
    txns = keys_covering("ready-txn")
    with WireClient("127.0.0.1", port) as c:
        for key_type, key in ((0, groups[0]), (1, txns[0])):
            found: FindCoordinatorResponse = retry(
                lambda: c.call(10, 4, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])),  # noqa: B023
                lambda r: r.coordinators[0].error_code == 0)
            assert found.coordinators[0].error_code == 0, found
        described: DescribeGroupsResponse = retry(
            lambda: c.call(15, 5, DescribeGroupsRequest(groups=groups)),
            lambda r: all(g.error_code not in NOT_READY for g in r.groups))
        assert all(g.error_code not in NOT_READY for g in described.groups), described
        # An idempotent producer's id comes from a block Kafka's controller hands out on first use.
        ids: InitProducerIdResponse = retry(
            lambda: c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)),
            lambda r: r.error_code == 0)
        assert ids.error_code == 0, ids
        txn: DescribeTransactionsResponse = retry(
            lambda: c.call(65, 0, DescribeTransactionsRequest(transactional_ids=txns)),
            lambda r: all(t.error_code == TRANSACTIONAL_ID_NOT_FOUND for t in r.transaction_states))
        assert all(t.error_code == TRANSACTIONAL_ID_NOT_FOUND for t in txn.transaction_states), txn


@pytest.fixture(scope="session")
def kcoord(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One kcoord broker for the differential tests (each test uses its own groups and topics),
    with a SASL_PLAINTEXT listener and users as the session's Kafka has them."""
    server = BrokerProcess(tmp_path_factory.mktemp("kcoord-differential") / "data", KCOORD_SETTINGS)
    server.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{server.port},SASL_PLAINTEXT://127.0.0.1:{free_port()}",
        "advertised.listeners": "",
        "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in SASL_USERS.items()),
        "delegation.token.secret.key": TOKEN_SECRET,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
    })
    server.start()
    try:
        server.wait_loaded()
        yield server
    finally:
        server.kill()


def sasl_port(broker: BrokerProcess) -> int:
    """The port of the differential kcoord broker's SASL_PLAINTEXT listener."""
    listener = next(entry for entry in broker.overrides["listeners"].split(",") if entry.startswith("SASL_PLAINTEXT"))
    return int(listener.rsplit(":", 1)[1])


@pytest.fixture(scope="session")
def pair(kafka: Any, kcoord: BrokerProcess) -> Pair:
    wait_ready(kafka.port)
    wait_ready(kcoord.port)
    return Pair(Target("kafka", kafka.port), Target("kcoord", kcoord.port))


def start_pair(kafka_libs: Path, work: Path, settings: dict[str, str]) -> tuple[Any, BrokerProcess]:
    """A dedicated Kafka and kcoord, both with ``settings``, for a module that needs a broker
    setting the shared Kafka cannot have (the caller stops both)."""
    from testkit.kafka import KafkaProcess

    reference = KafkaProcess(kafka_libs, work / "kafka", dict(settings)).start()
    ours = BrokerProcess(work / "kcoord" / "data", {**KCOORD_SETTINGS, **settings})
    (work / "kcoord").mkdir(parents=True, exist_ok=True)
    ours.start()
    ours.wait_loaded()
    return reference, ours


def sasl_listener_pair(kafka_libs: Path, work: Path, settings: dict[str, str], *,
                       advertised_host: str = "127.0.0.1") -> tuple[Any, int, BrokerProcess, int]:
    """A dedicated Kafka and kcoord (not started), each with a SASL_PLAINTEXT listener beside
    PLAINTEXT configured by the same ``settings`` (mechanisms, JAAS configs, validators), for a
    module whose SASL setup the shared Kafka cannot have: (kafka, its SASL port, kcoord, its SASL
    port). ``advertised_host``: the name clients are sent to (Kerberos needs the service's)."""
    from testkit.kafka import KafkaProcess

    kafka = KafkaProcess(kafka_libs, work / "kafka")
    kafka_sasl = free_port()
    kafka.properties.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{kafka_sasl},"
                     f"CONTROLLER://127.0.0.1:{kafka.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://{advertised_host}:{kafka_sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        **settings,
    })
    (work / "kcoord").mkdir(parents=True, exist_ok=True)
    kcoord = BrokerProcess(work / "kcoord" / "data", {})
    kcoord_sasl = free_port()
    kcoord.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kcoord.port},SASL_PLAINTEXT://127.0.0.1:{kcoord_sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kcoord.port},"
                                f"SASL_PLAINTEXT://{advertised_host}:{kcoord_sasl}",
        **settings,
    })
    return kafka, kafka_sasl, kcoord, kcoord_sasl
