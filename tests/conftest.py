"""Shared fixtures: real `kcoord serve` processes on loopback with their own data dirs."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.etcd import ETCD_BINARY, EtcdProcess
from testkit.kcoord import BrokerProcess


def _librdkafka_consumers() -> list[Any]:
    try:
        from confluent_kafka import Consumer
    except ImportError:
        return []
    # type(), not isinstance(): a dead weak proxy among the objects raises on any attribute read.
    return [o for o in gc.get_objects() if issubclass(type(o), Consumer)]


@pytest.fixture(autouse=True)
def _no_client_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A librdkafka consumer a test leaves behind (a failure before its `close`, a polling thread
    never stopped) keeps reconnecting to a broker that has stopped, for the rest of the session,
    taking CPU from every later test. After each integration test: stop the polling threads it
    started, and close the consumers it created that are still alive."""
    if "integration" not in request.node.path.parts:
        yield
        return
    threads_before = set(threading.enumerate())
    consumers_before = {id(c) for c in _librdkafka_consumers()}
    yield
    for thread in set(threading.enumerate()) - threads_before:
        owner = getattr(getattr(thread, "_target", None), "__self__", thread)
        stop_flag = getattr(owner, "stop_flag", None)
        if isinstance(stop_flag, threading.Event):
            stop_flag.set()
            thread.join(15)
    gc.collect()  # consumers in reference cycles (callbacks that point back at their owner)
    leftovers = [c for c in _librdkafka_consumers() if id(c) not in consumers_before]
    if leftovers:
        # On a thread of its own: librdkafka's close can block for good (a thread that would not stop
        # may still be inside that consumer), and the test's thread must never wait on it unbounded.
        closer = threading.Thread(target=_close_all, args=(leftovers,), daemon=True, name="close-leftovers")
        closer.start()
        closer.join(30)


def _close_all(consumers: list[Any]) -> None:
    for consumer in consumers:
        consumer.close()  # idempotent


# The last guard against a run that never ends: pytest-timeout interrupts a test from Python, which
# a thread blocked inside a C library (librdkafka's destroy or close when its brokers are gone) never
# returns to; pyproject's faulthandler_timeout dumps every thread and ends the worker from C instead.
# After the session, the same from C bounds the process's own exit (a client library's threads
# joined at finalization), so that a worker that ran everything cannot hold the run open.
EXIT_DEADLINE_S = 300
_exit_dump: Any = None


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    import faulthandler

    global _exit_dump
    _exit_dump = os.fdopen(os.dup(2), "w")  # kept open until the process ends
    faulthandler.dump_traceback_later(EXIT_DEADLINE_S, file=_exit_dump, exit=True)


BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, data_dir: Path | None = None,
             start: bool = True) -> BrokerProcess:
        b = BrokerProcess(data_dir or tmp_path / f"data{len(started)}", overrides)
        started.append(b)
        if start:
            b.start_loaded()
        return b

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    """One etcd for the whole session; each cluster test uses its own key space (cluster.id)."""
    if not os.path.exists(ETCD_BINARY):
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    server = EtcdProcess(tmp_path_factory.mktemp("etcd") / "data").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """Apache Kafka's jars (broker, tools, Java clients, Streams), fetched by scripts/kafka.sh.
    scripts/test.sh fetches them and sets KCOORD_REQUIRE_KAFKA=1: there, their absence fails."""
    from testkit.kafka import java
    from testkit.kafka import kafka_libs as find_libs

    libs = find_libs()
    if libs is None or java() is None:
        message = "Apache Kafka is not fetched (bash scripts/kafka.sh) or java is missing"
        if os.environ.get("KCOORD_REQUIRE_KAFKA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return libs


@pytest.fixture(scope="session")
def kafka(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real Apache Kafka broker for the whole session, the reference of the differential tests
    (PLAINTEXT, and SASL_PLAINTEXT for the tests of authenticated requests: delegation tokens), with
    Kafka's in-memory topology description plugin (KIP-1331)."""
    from testkit.kafka import SASL_USERS, TOPOLOGY_DESCRIPTION_PLUGIN, KafkaProcess

    server = KafkaProcess(kafka_libs, tmp_path_factory.mktemp("apache-kafka"), TOPOLOGY_DESCRIPTION_PLUGIN,
                          sasl_users=SASL_USERS).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every analysis test (its JVM takes seconds to start)."""
    import shutil

    pytest.importorskip("pyspark", reason="the analysis tests need the analysis extra (pyspark)")
    pytest.importorskip("pyarrow", reason="Python data sources need pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    from analytics.job import build_session

    session = build_session("local[2]", "kcoord-tests", {"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


# Processes that the whole session shares, and the test modules that need them: with pytest-xdist
# (scripts/test.sh runs two workers) all of a group's modules run on one worker, so that each process
# is started once; every other module runs whole on one worker (its module fixtures start once).
# Collection checks the lists: a module that uses one of these fixtures and is not listed fails.
KAFKA_MODULES = {"tests/integration/test_java_clients.py", "tests/integration/test_kafka_tools.py",
                 "tests/integration/test_storage_interchange.py",
                 "tests/integration/test_share_records_interchange.py"}  # and all of tests/differential/
SPARK_MODULES = {"tests/integration/test_analysis.py", "tests/integration/test_rebalance_journal_spark.py"}


def test_group(nodeid: str) -> str:
    """The unit of work a test belongs to on the xdist workers."""
    module = nodeid.split("::", 1)[0]
    if module.startswith("tests/differential/") or module in KAFKA_MODULES:
        return "apache-kafka"
    if module in SPARK_MODULES:
        return "spark"
    return module


test_group.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


# The tiers: each folder of tests/ that holds test modules, and the marker all of its tests carry
# (registered in pyproject.toml). `-m "unit or property"` runs the tests that start no broker, etcd or Kafka
# (scripts/quick-test.sh); `-m "integration or differential"` those that run brokers and clients.
TIERS = {"unit": "unit", "property": "property", "integration": "integration", "differential": "differential"}


def test_tier(nodeid: str) -> str:
    """The tier of a test: the folder under tests/ its module is in."""
    parts = nodeid.split("::", 1)[0].split("/")
    folder = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    if folder not in TIERS:
        raise pytest.UsageError(f"{nodeid} is in no tier: add its folder to TIERS in tests/conftest.py")
    return TIERS[folder]


test_tier.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(test_tier(item.nodeid))
        fixtures = set(getattr(item, "fixturenames", ()))
        for group, needs in (("apache-kafka", {"kafka", "pair"}), ("spark", {"spark"})):
            if fixtures & needs and test_group(item.nodeid) != group:
                raise pytest.UsageError(f"{item.nodeid} uses the session's {group}: list its module in "
                                        f"tests/conftest.py ({group} group)")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling, with the units above, that survives a worker ended mid-test
    (faulthandler_timeout above; testkit/xdist_scheduling.py)."""
    from testkit.xdist_scheduling import SharedProcessScheduling

    return SharedProcessScheduling(config, log, test_group)
