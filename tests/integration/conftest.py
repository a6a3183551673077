"""Fixtures of the integration tests, one definition each. A test module tunes the broker or
cluster a fixture starts for it through module attributes: ``CLUSTER_OVERRIDES`` (properties of
every node of ``cluster``), ``SECURE_OVERRIDES`` (properties of the ``secure`` broker) and
``prepare_secure(broker)`` (run once that broker serves: topics, ACLs, users its tests expect)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kclient.wire_client import WireClient
from testkit.etcd import EtcdProcess
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.cluster import Cluster
from tests.integration.helpers.java import compiled_java
from tests.integration.helpers.security import SecureBroker, start_secure_broker


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[WireClient]:
    """A blocking wire client connected to ``broker``."""
    with WireClient("127.0.0.1", broker.port) as c:
        yield c


@pytest.fixture
def cluster(request: pytest.FixtureRequest, etcd: EtcdProcess, tmp_path: Path) -> Iterator[Cluster]:
    """kcoord nodes on one shared data dir joined through the session's etcd (none started yet)."""
    c = Cluster(etcd, tmp_path, **getattr(request.module, "CLUSTER_OVERRIDES", {}))
    yield c
    c.stop_all()


@pytest.fixture(scope="module")
def secure(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    """One broker per test module with every listener kind (SSL, SASL_PLAINTEXT, SASL_SSL beside
    PLAINTEXT), a test CA and users."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    broker = start_secure_broker(tmp_path_factory.mktemp(name), getattr(request.module, "SECURE_OVERRIDES", None))
    try:
        prepare = getattr(request.module, "prepare_secure", None)
        if prepare is not None:
            prepare(broker)
        yield broker
    finally:
        broker.process.kill()


@pytest.fixture(scope="session")
def java_classes(kafka_libs: Path) -> Path:
    """The Java test programs of tests/java/, compiled against Kafka's jars."""
    return compiled_java(kafka_libs)
