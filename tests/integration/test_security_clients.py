"""Production-configured clients connect unchanged: confluent-kafka, kafka-python, aiokafka and kcat
over SSL, SASL_PLAINTEXT and SASL_SSL (PLAIN and SCRAM-SHA-512) produce, form a group, commit and
read their commit back; a wrong password or an unknown user fails with the client's own
authentication error. One broker serves every listener kind at once."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.integration.helpers.clients import create_topic, wait_for
from tests.integration.helpers.security import USERS, SecureBroker, start_secure_broker

pytestmark = pytest.mark.timeout(90)

# (listener, SASL mechanism): every secured way in that the acceptance names.
WAYS = [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-512")]
WAY_IDS = [f"{listener}-{mechanism or 'cert'}" for listener, mechanism in WAYS]




def _fresh_topic(secure: SecureBroker) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic = f"t-{suffix}"
    create_topic(secure.bootstrap("PLAINTEXT"), topic, 1)
    return topic, f"g-{suffix}"


def _committed(secure: SecureBroker, group: str, topic: str) -> int:
    """What the group has committed, as a PLAINTEXT client reads it back."""
    consumer = Consumer({"bootstrap.servers": secure.bootstrap("PLAINTEXT"), "group.id": group})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        consumer.close()


@pytest.mark.parametrize(("listener", "mechanism"), WAYS, ids=WAY_IDS)
def test_confluent_kafka(secure: SecureBroker, listener: str, mechanism: str | None) -> None:
    topic, group = _fresh_topic(secure)
    conf = secure.confluent_conf(listener, mechanism or "PLAIN")
    producer = Producer(conf)
    for i in range(3):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60  # a group join can take long on a loaded machine
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"m0", b"m1", b"m2"]
        consumer.commit(asynchronous=False)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 3
    finally:
        consumer.close()
    assert _committed(secure, group, topic) == 3


def _kafka_python_conf(secure: SecureBroker, listener: str, mechanism: str | None,
                       password: str | None = None, user: str = "alice") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": secure.bootstrap(listener), "security_protocol": listener}
    if listener.endswith("SSL"):
        conf["ssl_cafile"] = str(secure.pki.ca)
    if mechanism is not None:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=USERS.get(user, "x") if password is None else password)
    return conf


@pytest.mark.parametrize(("listener", "mechanism"), WAYS, ids=WAY_IDS)
def test_kafka_python(secure: SecureBroker, listener: str, mechanism: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KTopicPartition

    topic, group = _fresh_topic(secure)
    conf = _kafka_python_conf(secure, listener, mechanism)
    producer = KafkaProducer(**conf)
    for i in range(3):
        producer.send(topic, f"m{i}".encode())
    producer.flush(15)
    producer.close()
    # A join that raced the new topic's metadata assigns nothing (kafka-python's range assignor:
    # "No partition metadata for topic"), and under load no refresh made it join again within a
    # minute: the consumer knows the topic's partitions before it subscribes.
    consumer = KafkaConsumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             metadata_max_age_ms=1000, **conf)
    try:
        wait_for(lambda: consumer.partitions_for_topic(topic), 60, f"kafka-python to learn the partitions of {topic}")
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60  # a group join can take long on a loaded machine
        while len(got) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)
        assert got == [b"m0", b"m1", b"m2"]
        consumer.commit()
        assert consumer.committed(KTopicPartition(topic, 0)) == 3
    finally:
        consumer.close()
    assert _committed(secure, group, topic) == 3


def _aiokafka_conf(secure: SecureBroker, listener: str, mechanism: str | None,
                   password: str | None = None, user: str = "alice") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": secure.bootstrap(listener), "security_protocol": listener}
    if listener.endswith("SSL"):
        conf["ssl_context"] = ssl.create_default_context(cafile=str(secure.pki.ca))
    if mechanism is not None:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=USERS.get(user, "x") if password is None else password)
    return conf


@pytest.mark.parametrize(("listener", "mechanism"), WAYS, ids=WAY_IDS)
def test_aiokafka(secure: SecureBroker, listener: str, mechanism: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    topic, group = _fresh_topic(secure)

    async def run() -> None:
        producer = AIOKafkaProducer(**_aiokafka_conf(secure, listener, mechanism))
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"m{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                    **_aiokafka_conf(secure, listener, mechanism))
        await consumer.start()
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + 60  # a group join can take long on a loaded machine
            while len(got) < 3 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(r.value for r in records)
            assert got == [b"m0", b"m1", b"m2"]
            await consumer.commit()
            assert await consumer.committed(ATopicPartition(topic, 0)) == 3
        finally:
            await consumer.stop()

    asyncio.run(run())
    assert _committed(secure, group, topic) == 3


def _kcat_args(secure: SecureBroker, listener: str, mechanism: str | None, password: str | None = None,
               user: str = "alice") -> list[str]:
    conf = secure.confluent_conf(listener, mechanism or "PLAIN", user=user, password=password)
    args = ["kcat", "-b", conf.pop("bootstrap.servers")]
    for key, value in conf.items():
        args += ["-X", f"{key}={value}"]
    return args


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by the test command")
@pytest.mark.parametrize(("listener", "mechanism"), WAYS, ids=WAY_IDS)
def test_kcat(secure: SecureBroker, listener: str, mechanism: str | None) -> None:
    topic, group = _fresh_topic(secure)
    base = _kcat_args(secure, listener, mechanism)
    subprocess.run([*base, "-P", "-t", topic], input="m0\nm1\nm2", text=True, check=True, timeout=30)
    out = subprocess.run([*base, "-G", group, "-e", "-q", "-X", "auto.offset.reset=earliest", "-f", "%s\n", topic],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["m0", "m1", "m2"]
    assert _committed(secure, group, topic) == 3


# ---- failed authentication --------------------------------------------------------------------

BAD_LOGINS = [("alice", "wrong-password"), ("mallory", "any")]
BAD_IDS = ["wrong-password", "unknown-user"]


@pytest.mark.parametrize(("user", "password"), BAD_LOGINS, ids=BAD_IDS)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_kafka_reports_an_authentication_error(secure: SecureBroker, mechanism: str, user: str,
                                                         password: str) -> None:
    errors: list[KafkaError] = []
    conf = secure.confluent_conf("SASL_SSL", mechanism, user=user, password=password)
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "Authentication failed" in errors[0].str()


@pytest.mark.parametrize(("user", "password"), BAD_LOGINS, ids=BAD_IDS)
def test_kafka_python_reports_an_authentication_error(secure: SecureBroker, user: str, password: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KError

    # kafka-python retries bootstrapping until its timeout, logging the broker's error each time.
    with pytest.raises(KError):
        KafkaProducer(**_kafka_python_conf(secure, "SASL_PLAINTEXT", "SCRAM-SHA-512", password=password, user=user),
                      bootstrap_timeout_ms=2000)
    assert "SaslAuthenticationFailedError: Authentication failed: Invalid user credentials" in caplog.text


@pytest.mark.parametrize(("user", "password"), BAD_LOGINS, ids=BAD_IDS)
def test_aiokafka_reports_an_authentication_error(secure: SecureBroker, user: str, password: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AError

    async def run() -> None:
        producer = AIOKafkaProducer(**_aiokafka_conf(secure, "SASL_SSL", "PLAIN", password=password, user=user))
        try:
            await producer.start()
        finally:
            await producer.stop()

    # aiokafka gives up bootstrapping and logs the broker's error for the connection it tried.
    with pytest.raises(AError):
        asyncio.run(run())
    assert "SaslAuthenticationFailed: Authentication failed" in caplog.text


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by the test command")
def test_kcat_reports_an_authentication_error(secure: SecureBroker) -> None:
    out = subprocess.run([*_kcat_args(secure, "SASL_SSL", "SCRAM-SHA-512", password="wrong"), "-L", "-m", "5"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "Authentication failed" in out.stderr


def test_failed_authentications_are_counted_by_mechanism(secure: SecureBroker) -> None:
    from urllib.request import urlopen

    text = urlopen(f"http://127.0.0.1:{secure.process.metrics_port}/metrics", timeout=5).read().decode()
    assert 'kcoord_authentications_total{mechanism="SCRAM-SHA-512",result="success"}' in text
    assert 'kcoord_authentications_total{mechanism="PLAIN",result="failure"}' in text


# ---- SCRAM users through the admin API ---------------------------------------------------------

def test_scram_users_are_created_described_used_and_deleted_through_the_admin_api(secure: SecureBroker) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(10)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(10)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]

    carol = Producer(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="carol", password="carol-secret"))
    assert carol.list_topics(timeout=10).brokers

    with pytest.raises(Exception, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(10)
    errors: list[KafkaError] = []
    gone = Producer({**secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="carol", password="carol-secret"),
                     "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        gone.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION


def test_scram_credentials_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    broker = start_secure_broker(tmp_path_factory.mktemp("restart"))
    try:
        admin = AdminClient(broker.confluent_conf("SASL_PLAINTEXT", "PLAIN", user="admin"))
        upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"dave-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(10)
        broker.process.kill()  # no graceful shutdown: the acknowledged change must already be on disk
        broker.process.start()
        dave = Producer(broker.confluent_conf("SASL_PLAINTEXT", "SCRAM-SHA-256", user="dave", password="dave-secret"))
        assert dave.list_topics(timeout=10).brokers
    finally:
        broker.process.kill()
