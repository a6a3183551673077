"""Apache Kafka's own command-line tools against kcoord, run from Kafka 4.4's jars: kafka-topics,
kafka-configs, kafka-consumer-groups, kafka-streams-groups, kafka-acls, kafka-transactions, kafka-delete-records,
kafka-log-dirs, the console producer and consumer, kafka-get-offsets, and the system-test clients
VerifiableProducer/VerifiableConsumer through a rolling bounce. Where the scenario allows, the same tool runs against a real Kafka and
the outputs are compared once normalized (ids, timestamps, what only one of them has)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, wait_for
from tests.integration.helpers.kafka_programs import (
    ACLS,
    CONFIGS,
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    DELETE_RECORDS,
    GET_OFFSETS,
    GROUPS,
    LOG_DIRS,
    STREAMS_GROUPS,
    TOPICS,
    TRANSACTIONS,
    VERIFIABLE_CONSUMER,
    VERIFIABLE_PRODUCER,
    JsonProcess,
    Tools,
    assigned_now,
    consumed_offsets,
    on_both,
    tab_table,
    table,
)
from tests.integration.helpers.metrics import scrape

pytestmark = [pytest.mark.timeout(180), pytest.mark.differential]
SUFFIX = uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def kcoord(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # KIP-848 members heartbeat every second rather than every 5 s: a rolling bounce settles sooner.
    broker = BrokerProcess(tmp_path_factory.mktemp("kcoord-tools") / "data", {
        "group.consumer.heartbeat.interval.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "1000"}).start()
    broker.wait_loaded()
    yield broker
    broker.kill()


@pytest.fixture(scope="module")
def tools(kafka_libs: Path, kcoord: BrokerProcess) -> Tools:
    return Tools(kafka_libs, kcoord.bootstrap)


@pytest.fixture(scope="module")
def reference(kafka_libs: Path, kafka: Any) -> Tools:
    return Tools(kafka_libs, kafka.bootstrap)


def create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    """A topic created with the admin API of librdkafka: no JVM to start where the topic is only
    the scene of a test."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(30)


def _describe_topic(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """kafka-topics --describe: the topic line's fields and one dict per partition line, without
    TopicId (random). The ELR fields come from DescribeTopicPartitions, which both brokers serve."""
    topic: dict[str, str] = {}
    partitions: list[dict[str, str]] = []
    for line in text.splitlines():
        fields = dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in line.strip().split("\t"))
        fields = {k: v for k, v in fields.items() if k != "TopicId"}
        if "PartitionCount" in fields:
            topic = fields
        elif "Partition" in fields:
            partitions.append(fields)
    return topic, partitions


def _configs(value: str) -> set[str]:
    """`Configs: a=1,b=2` as a set, without min.insync.replicas (a Kafka broker default that the
    reference reports as a static broker config and kcoord, with one replica, does not have)."""
    return {c for c in value.split(",") if c and not c.startswith("min.insync.replicas=")}


def test_kafka_topics_create_list_describe_alter_delete(tools: Tools, reference: Tools) -> None:
    topic = f"tools-topics-{SUFFIX}"
    created = on_both(tools, reference, lambda t: t.out(
        TOPICS, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
        "--config", "retention.ms=123456", "--config", "cleanup.policy=compact"))
    assert created[0] == created[1] == f"Created topic {topic}."

    listed = tools.out(TOPICS, "--list").splitlines()
    assert topic in listed and "__consumer_offsets" in listed

    # Kafka 4's kafka-topics asks DescribeTopicPartitions: the same description, ELR fields included.
    ours, theirs = on_both(tools, reference, lambda t: _describe_topic(t.out(TOPICS, "--describe", "--topic", topic)))
    assert ours[0]["PartitionCount"] == theirs[0]["PartitionCount"] == "3"
    assert _configs(ours[0].pop("Configs")) == _configs(theirs[0].pop("Configs")) == {
        "cleanup.policy=compact", "retention.ms=123456"}
    assert ours == theirs
    assert [p["Partition"] for p in ours[1]] == ["0", "1", "2"]

    on_both(tools, reference, lambda t: t.run(TOPICS, "--alter", "--topic", topic, "--partitions", "5"))
    ours, theirs = on_both(tools, reference, lambda t: _describe_topic(t.out(TOPICS, "--describe", "--topic", topic)))
    assert ours[0]["PartitionCount"] == "5" and ours[1] == theirs[1]

    shrink = tools.run(TOPICS, "--alter", "--topic", topic, "--partitions", "2", check=False)
    assert shrink.returncode == 1 and "InvalidPartitionsException" in shrink.stdout + shrink.stderr

    tools.run(TOPICS, "--delete", "--topic", topic)
    assert topic not in tools.out(TOPICS, "--list").splitlines()


def _config_lines(text: str) -> dict[str, str]:
    """kafka-configs --describe: `name=value sensitive=... synonyms={FIRST, ...}` by name, keeping
    the first synonym (where the value comes from); further synonyms are the defaults below it,
    which Kafka and kcoord name differently (log.retention.ms against log.retention.hours)."""
    lines = {}
    for line in text.splitlines():
        if line.startswith("  "):
            head, _, synonyms = line.strip().partition(" synonyms={")
            lines[head.split("=", 1)[0]] = f"{head} synonyms={{{synonyms.split(', ')[0].rstrip('}')}}}"
    return lines


def test_kafka_configs_describe_topic_and_broker(tools: Tools, reference: Tools) -> None:
    topic = f"tools-configs-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):  # kafka-topics --create is tested above
        create(bootstrap, topic, 1, {"retention.ms": "86400000"})
    ours, theirs = on_both(tools, reference, lambda t: t.out(
        CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic))
    assert ours.splitlines()[0] == theirs.splitlines()[0] == f"Dynamic configs for topic {topic} are:"
    assert _config_lines(ours) == _config_lines(theirs) == {
        "retention.ms": "retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}"}

    every = _config_lines(tools.out(CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"))
    assert every["auto.create.topics.enable"].startswith("auto.create.topics.enable=true ")
    assert every["offsets.topic.num.partitions"].startswith("offsets.topic.num.partitions=50 ")
    assert every["num.partitions"] == "num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}"


def test_describe_configs_sources_as_kafka_reports_them(kcoord: BrokerProcess) -> None:
    """What kafka-configs shows rests on DescribeConfigs' sources (here through librdkafka, no JVM):
    a config the topic was created with is a dynamic topic config, the others defaults; broker
    booleans are written as Java writes them."""
    topic = f"tools-sources-{SUFFIX}"
    create(kcoord.bootstrap, topic, 1, {"retention.ms": "3600000"})
    admin = AdminClient({"bootstrap.servers": kcoord.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(15)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert set(configs["retention.ms"].synonyms) == {"retention.ms", "log.retention.ms"}
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value and configs["segment.bytes"].is_default
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    shown = admin.describe_configs([broker])[broker].result(15)
    assert shown["auto.create.topics.enable"].value == "true"
    assert shown["allow.everyone.if.no.acl.found"].value == "false"


def test_kafka_configs_alter_topic_broker_and_group(tools: Tools, reference: Tools) -> None:
    """kafka-configs --alter (IncrementalAlterConfigs) on a topic, the cluster-wide broker default
    and a group: the tool succeeds on both brokers and --describe shows the same afterwards."""
    topic, group = f"tools-alter-{SUFFIX}", f"tools-alter-group-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):
        create(bootstrap, topic, 1)
    on_both(tools, reference, lambda t: t.run(
        CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "retention.ms=1000,cleanup.policy=[delete,compact],max.message.bytes=2000"))
    ours, theirs = on_both(tools, reference, lambda t: _config_lines(t.out(
        CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic)))
    assert ours == theirs
    assert ours["retention.ms"] == "retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}"
    on_both(tools, reference, lambda t: t.run(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", topic,
                                               "--delete-config", "max.message.bytes"))
    ours, theirs = on_both(tools, reference, lambda t: _config_lines(t.out(
        CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic)))
    assert ours == theirs and "max.message.bytes" not in ours

    unknown = on_both(tools, reference, lambda t: t.run(
        CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config", "no.such.config=1",
        check=False))
    assert unknown[0].returncode == unknown[1].returncode != 0
    assert "Unknown topic config name: no.such.config" in unknown[0].stdout + unknown[0].stderr

    on_both(tools, reference, lambda t: t.run(CONFIGS, "--alter", "--entity-type", "groups", "--entity-name", group,
                                               "--add-config", "consumer.session.timeout.ms=50000"))
    ours, theirs = on_both(tools, reference, lambda t: _config_lines(t.out(
        CONFIGS, "--describe", "--entity-type", "groups", "--entity-name", group)))
    assert ours == theirs == {"consumer.session.timeout.ms":
                              "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
                              "consumer.session.timeout.ms=50000}"}

    on_both(tools, reference, lambda t: t.run(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
                                               "--add-config", "log.retention.bytes=123456789"))
    try:
        ours, theirs = on_both(tools, reference, lambda t: _config_lines(t.out(
            CONFIGS, "--describe", "--entity-type", "brokers", "--entity-default")))
        # Kafka's storage format also sets min.insync.replicas as a cluster default, and so does kcoord.
        assert ours == theirs
        assert ours["log.retention.bytes"] == ("log.retention.bytes=123456789 sensitive=false "
                                               "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=123456789}")
        assert ours["min.insync.replicas"] == ("min.insync.replicas=1 sensitive=false "
                                               "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}")
    finally:
        on_both(tools, reference, lambda t: t.run(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
                                                   "--delete-config", "log.retention.bytes"))
    read_only = tools.run(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1",
                          "--add-config", "node.id=5", check=False)
    assert read_only.returncode != 0 and "Cannot update these configs dynamically" in read_only.stdout + read_only.stderr


def _group_rows(text: str) -> list[tuple[str, ...]]:
    """kafka-consumer-groups --describe --offsets rows, sorted."""
    return sorted(tuple(row[c] for c in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                         "CONSUMER-ID", "HOST", "CLIENT-ID"))
                  for row in table(text, "GROUP"))


def test_console_clients_get_offsets_and_consumer_groups(tools: Tools, reference: Tools) -> None:
    """The console producer writes keyed records, the console consumer reads them in a group and
    commits; kafka-get-offsets and kafka-consumer-groups report the same on both brokers; offsets
    are reset, partly deleted, and the group deleted."""
    topic, group = f"tools-groups-{SUFFIX}", f"tools-group-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):
        create(bootstrap, topic, 3)
    records = "".join(f"key-{i % 5}\tvalue-{i}\n" for i in range(30))
    on_both(tools, reference, lambda t: t.run(CONSOLE_PRODUCER, "--topic", topic, "--reader-property",
                                               "parse.key=true", input=records))

    offsets = on_both(tools, reference, lambda t: t.out(GET_OFFSETS, "--topic", topic))
    assert offsets[0] == offsets[1]
    ends = {int(line.split(":")[1]): int(line.split(":")[2]) for line in offsets[0].splitlines()}
    assert sum(ends.values()) == 30 and len(ends) == 3  # same keys, same partitions: the default partitioner

    consumed = on_both(tools, reference, lambda t: t.out(
        CONSOLE_CONSUMER, "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "30",
        "--formatter-property", "print.key=true", "--formatter-property", "print.partition=true"))
    for output in consumed:
        lines = [line for line in output.splitlines() if line.startswith("Partition:")]
        assert sorted(line.split("\t", 1)[1] for line in lines) == sorted(records.splitlines())
    assert sorted(consumed[0].splitlines()) == sorted(consumed[1].splitlines())

    described = on_both(tools, reference, lambda t: t.out(GROUPS, "--describe", "--group", group))
    assert _group_rows(described[0]) == _group_rows(described[1]) == [
        (group, topic, str(p), str(ends[p]), str(ends[p]), "0", "-", "-", "-") for p in range(3)]

    state = table(tools.out(GROUPS, "--describe", "--group", group, "--state"), "GROUP")
    assert [(r["GROUP"], r["STATE"], r["#MEMBERS"]) for r in state] == [(group, "Empty", "0")]

    reset = on_both(tools, reference, lambda t: t.out(GROUPS, "--reset-offsets", "--group", group, "--topic",
                                                       f"{topic}:0,1", "--to-offset", "1", "--execute"))
    assert sorted(reset[0].splitlines()) == sorted(reset[1].splitlines())
    assert sorted((r["PARTITION"], r["NEW-OFFSET"]) for r in table(reset[0], "GROUP")) == [("0", "1"), ("1", "1")]

    deleted = on_both(tools, reference, lambda t: t.out(GROUPS, "--delete-offsets", "--group", group,
                                                         "--topic", f"{topic}:2"))
    assert deleted[0] == deleted[1]
    assert f"Request succeeded for deleting offsets from group {group}." in deleted[0]

    described = on_both(tools, reference, lambda t: t.out(GROUPS, "--describe", "--group", group))
    assert _group_rows(described[0]) == _group_rows(described[1]) == [
        (group, topic, str(p), "1", str(ends[p]), str(ends[p] - 1), "-", "-", "-") for p in (0, 1)]

    gone = on_both(tools, reference, lambda t: t.out(GROUPS, "--delete", "--group", group))
    assert gone[0] == gone[1] == f"Deletion of requested consumer groups ('{group}') was successful."
    assert group not in tools.out(GROUPS, "--list").splitlines()


def test_consumer_groups_describe_a_group_with_members(tools: Tools, reference: Tools) -> None:
    """Two members in a classic group, one commit each: kafka-consumer-groups' offsets, members and
    state tables are the same on both brokers but for member ids and the coordinator's address."""
    topic, group = f"tools-members-{SUFFIX}", f"tools-members-{SUFFIX}"
    members: list[ThreadedConsumer] = []
    try:
        for bootstrap in (tools.bootstrap, reference.bootstrap):
            create(bootstrap, topic, 4)
            pair = [ThreadedConsumer(bootstrap, group, [topic], **{"client.id": name}) for name in ("alpha", "beta")]
            members += pair
            wait_for(lambda pair=pair: covers_exactly(pair, topic, 4), 60, "the members to share the partitions")
            for member in pair:
                member.commit([TopicPartition(topic, p, 0) for _, p in sorted(member.held())][:1])

        offsets, listed, states = (on_both(tools, reference, lambda t, extra=extra: table(
            t.out(GROUPS, "--describe", "--group", group, *extra), "GROUP"))
            for extra in ((), ("--members",), ("--state",)))
        rows = [sorted((r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"], r["HOST"],
                        r["CONSUMER-ID"].startswith(r["CLIENT-ID"]), r["CLIENT-ID"] in ("alpha", "beta"))
                       for r in side) for side in offsets]
        assert rows[0] == rows[1] and len(rows[0]) == 4
        assert sorted(r[2] for r in rows[0]) == ["-", "-", "0", "0"]  # one committed partition per member
        described = [sorted((r["CLIENT-ID"], r["HOST"], r["#PARTITIONS"]) for r in side) for side in listed]
        assert described[0] == described[1] == [("alpha", "/127.0.0.1", "2"), ("beta", "/127.0.0.1", "2")]
        state = [[(r["GROUP"], r["ASSIGNMENT-STRATEGY"], r["STATE"], r["#MEMBERS"]) for r in side] for side in states]
        assert state[0] == state[1] == [(group, "range", "Stable", "2")]
    finally:
        for member in members:
            member.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    """kcoord with the ACL authorizer on: PLAINTEXT (User:ANONYMOUS, a super user, where the tool
    runs as an operator) and SASL_PLAINTEXT (alice, a SCRAM user, subject to the ACLs)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("kcoord-acls") / "data")
    sasl_port = free_port()
    broker.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": "",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "sasl.bootstrap.users": "alice:alice-secret",
    })
    broker.start()
    broker.wait_loaded()
    yield broker, sasl_port
    broker.kill()


def test_kafka_acls_add_list_remove_and_enforced(kafka_libs: Path, secured: tuple[BrokerProcess, int],
                                                 tmp_path: Path) -> None:
    broker, sasl_port = secured
    operator = Tools(kafka_libs, broker.bootstrap)
    alice = Tools(kafka_libs, f"127.0.0.1:{sasl_port}")
    alice_config = tmp_path / "alice.properties"
    alice_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";\n')
    topic, group = f"acl-orders-{SUFFIX}", f"acl-billing-{SUFFIX}"

    def alice_describes() -> str:
        done = alice.run(GROUPS, "--describe", "--group", group, "--command-config", str(alice_config), check=False)
        return done.stdout + done.stderr

    assert "GroupAuthorizationException" in alice_describes()

    added = operator.out(ACLS, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                         "--topic", topic, "--group", group)
    assert f"ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)" in added
    operator.run(ACLS, "--add", "--allow-principal", "User:alice", "--producer", "--topic", "acl-",
                 "--resource-pattern-type", "prefixed")
    listed = operator.out(ACLS, "--list", "--principal", "User:alice")
    for resource, operations in [
            (f"resourceType=TOPIC, name={topic}, patternType=LITERAL", {"DESCRIBE"}),
            (f"resourceType=GROUP, name={group}, patternType=LITERAL", {"DESCRIBE"}),
            ("resourceType=TOPIC, name=acl-, patternType=PREFIXED", {"DESCRIBE", "WRITE", "CREATE"})]:
        block = listed.split(f"ResourcePattern({resource})`:", 1)[1].split("\n\n", 1)[0]
        assert {line.split("operation=")[1].split(",")[0] for line in block.strip().splitlines()} == operations
        assert all("principal=User:alice, host=*" in line for line in block.strip().splitlines())

    # Allowed now: alice may be told that the group does not exist (as a Kafka 4.4 broker says it).
    assert f"GroupIdNotFoundException: Group {group} not found." in alice_describes()

    operator.run(ACLS, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Describe",
                 "--group", group)
    assert "GroupAuthorizationException" in alice_describes()


def _open_transactions(bootstrap: str, name: str, topic: str) -> tuple[Producer, Producer]:
    """`{name}-done` commits one transaction; `{name}-open` has one open, on partition 1."""
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-done"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(topic, b"committed", partition=0)
    done.commit_transaction(30)
    still = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-open",
                      "transaction.timeout.ms": 120000})
    still.init_transactions(30)
    still.begin_transaction()
    still.produce(topic, b"pending", partition=1)
    assert still.flush(30) == 0
    return done, still


def test_kafka_transactions_list_and_describe(tools: Tools, reference: Tools, kcoord: BrokerProcess,
                                              kafka: Any) -> None:
    topic, name = f"tools-txn-{SUFFIX}", f"tools-txn-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):
        create(bootstrap, topic, 2)
    producers = [_open_transactions(b.bootstrap, name, topic) for b in (kcoord, kafka)]
    try:
        listed = on_both(tools, reference, lambda t: tab_table(t.out(TRANSACTIONS, "list")))
        for rows in listed:
            mine = {r["TransactionalId"]: r for r in rows if r["TransactionalId"].startswith(name)}
            assert {k: r["TransactionState"] for k, r in mine.items()} == {
                f"{name}-done": "CompleteCommit", f"{name}-open": "Ongoing"}
            assert {r["Coordinator"] for r in mine.values()} == {"1"}

        described = on_both(tools, reference, lambda t: tab_table(
            t.out(TRANSACTIONS, "describe", "--transactional-id", f"{name}-open")))
        for rows in described:
            assert len(rows) == 1
            row = rows[0]
            assert (row["TransactionalId"], row["TransactionState"], row["TransactionTimeoutMs"],
                    row["TopicPartitions"], row["CoordinatorId"]) == (f"{name}-open", "Ongoing", "120000",
                                                                       f"{topic}-1", "1")
            assert 0 <= int(row["TransactionDurationMs"]) < 120000
        assert described[0][0].keys() == described[1][0].keys()
    finally:
        for _, still in producers:
            still.abort_transaction(30)


def test_kafka_transactions_describe_producers(tools: Tools, reference: Tools) -> None:
    """describe-producers lists a partition's idempotent producer alike on both brokers (its id
    aside); a partition without producers gives the header alone."""
    topic = f"tools-producers-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):
        create(bootstrap, topic, 2)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
        for i in range(3):
            producer.produce(topic, b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + i)
            producer.flush(30)
    described = on_both(tools, reference, lambda t: tab_table(
        t.out(TRANSACTIONS, "describe-producers", "--topic", topic, "--partition", "0")))
    for rows in described:
        assert len(rows) == 1 and int(rows[0].pop("ProducerId")) >= 0
    assert described[0] == described[1] == [{"ProducerEpoch": "0", "LatestCoordinatorEpoch": "-1",
                                              "LastSequence": "2", "LastTimestamp": "1700000000002",
                                              "CurrentTransactionStartOffset": "None"}]
    assert "ProducerId" in tools.out(TRANSACTIONS, "describe-producers", "--topic", "__consumer_offsets",
                                     "--partition", "0")


def test_kafka_transactions_find_hanging(tools: Tools) -> None:
    """find-hanging walks the broker's log directory (DescribeLogDirs), every partition's producers
    (DescribeProducers) and their transactions: a transaction open for seconds is not hanging."""
    topic = f"tools-hanging-{SUFFIX}"
    create(tools.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": tools.bootstrap, "transactional.id": f"hanging-{SUFFIX}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1)
    assert producer.flush(30) == 0
    try:
        for scope in (["--broker-id", "1"], ["--topic", topic]):
            rows = tab_table(tools.out(TRANSACTIONS, "find-hanging", *scope))
            assert rows == [], rows
        (open_,) = tab_table(tools.out(TRANSACTIONS, "describe-producers", "--topic", topic, "--partition", "1"))
        assert open_["CurrentTransactionStartOffset"] == "0"
    finally:
        producer.abort_transaction(30)


def test_kafka_delete_records(tools: Tools, reference: Tools, tmp_path: Path) -> None:
    """kafka-delete-records moves the log start on both brokers alike; kafka-get-offsets then
    gives it as the earliest offset, and an offset past the end is refused the same way."""
    topic = f"tools-delrec-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):
        create(bootstrap, topic, 2)
    on_both(tools, reference, lambda t: t.run(CONSOLE_PRODUCER, "--topic", topic, "--producer-property",
                                               "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
                                               input="".join(f"v{i}\n" for i in range(10))))
    plan = tmp_path / "delete.json"
    plan.write_text(f'{{"version": 1, "partitions": [{{"topic": "{topic}", "partition": 0, "offset": 3}},'
                    f' {{"topic": "{topic}", "partition": 1, "offset": -1}}]}}')
    # One line per partition, in the order of Kafka's hash map.
    deleted = on_both(tools, reference, lambda t: sorted(t.out(DELETE_RECORDS, "--offset-json-file",
                                                               str(plan)).splitlines()))
    assert deleted[0] == deleted[1]
    assert f"partition: {topic}-0\tlow_watermark: 3" in deleted[0]
    assert f"partition: {topic}-1\tlow_watermark: 5" in deleted[0]
    starts = on_both(tools, reference, lambda t: t.out(GET_OFFSETS, "--topic", topic, "--time", "-2"))
    assert starts[0] == starts[1] == f"{topic}:0:3\n{topic}:1:5"
    plan.write_text(f'{{"version": 1, "partitions": [{{"topic": "{topic}", "partition": 0, "offset": 99}}]}}')
    refused = on_both(tools, reference, lambda t: t.run(DELETE_RECORDS, "--offset-json-file", str(plan),
                                                         check=False).stdout)
    # The error line carries the client's clock: its exception class is what is compared.
    for text in refused:
        assert f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in text


def _log_dirs(text: str, topic: str) -> dict[str, Any]:
    """kafka-log-dirs --describe: the JSON line, with the topic's partitions by name."""
    import json

    answer = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
    (broker,) = answer["brokers"]
    (log_dir,) = broker["logDirs"]
    return {"error": log_dir["error"], "partitions": {p["partition"]: p for p in log_dir["partitions"]
                                                       if p["partition"].startswith(topic)}}


def test_kafka_log_dirs_describe(tools: Tools, reference: Tools, kcoord: BrokerProcess) -> None:
    """kafka-log-dirs --describe lists the one log directory, the partitions asked for with their
    size on disk, no lag and no future replica, as Kafka does."""
    topic = f"tools-logdirs-{SUFFIX}"
    for bootstrap in (tools.bootstrap, reference.bootstrap):
        create(bootstrap, topic, 2)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        producer.produce(topic, b"x" * 500, partition=0, timestamp=1_700_000_000_000)
        producer.flush(30)
    described = on_both(tools, reference, lambda t: _log_dirs(
        t.out(LOG_DIRS, "--describe", "--topic-list", topic), topic))
    for answer in described:
        assert answer["error"] is None
        assert answer["partitions"][f"{topic}-1"] == {"partition": f"{topic}-1", "size": 0, "offsetLag": 0,
                                                       "isFuture": False}
        assert answer["partitions"][f"{topic}-0"]["size"] > 500
    assert described[0] == described[1]
    text = tools.out(LOG_DIRS, "--describe", "--topic-list", topic)
    assert f'"logDir":"{kcoord.data_dir.resolve()}"' in text or f'"logDir":"{kcoord.data_dir}"' in text


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_verifiable_consumers_through_a_rolling_bounce(kafka_libs: Path, tools: Tools, kcoord: BrokerProcess,
                                                       protocol: str) -> None:
    """Kafka's system-test scenario: a VerifiableProducer writes while three VerifiableConsumers
    in one group (classic, or KIP-848's consumer protocol) are restarted one at a time. Every
    acknowledged record is consumed, the group's committed offsets never go back and end at the log
    end, and records are consumed twice only where a commit failed (the at-least-once window)."""
    topic, group, partitions = f"bounce-{protocol}-{SUFFIX}", f"bounce-{protocol}-{SUFFIX}", 6
    create(tools.bootstrap, topic, partitions)
    # The consumer protocol takes its session from the broker (group.consumer.* of the fixture).
    timing = ["--session-timeout", "10000"] if protocol == "classic" else []

    def consumer(n: int) -> JsonProcess:
        return JsonProcess(kafka_libs, VERIFIABLE_CONSUMER, "--bootstrap-server", kcoord.bootstrap, "--topic",
                           topic, "--group-id", group, "--group-protocol", protocol, *timing,
                           "--reset-policy", "earliest")

    consumers = [consumer(n) for n in range(3)]
    every = list(consumers)
    producer = JsonProcess(kafka_libs, VERIFIABLE_PRODUCER, "--bootstrap-server", kcoord.bootstrap, "--topic", topic,
                           "--max-messages", "3000", "--throughput", "200")
    try:
        def covered(current: list[JsonProcess]) -> bool:
            held = [assigned_now(c) for c in current]
            return sum(len(h) for h in held) == partitions and all(held) and \
                len(set().union(*held)) == partitions

        def acked_ends() -> dict[tuple[str, int], int]:
            """The last offset the producer has had acknowledged, per partition, so far."""
            ends: dict[tuple[str, int], int] = {}
            for event in producer.named("producer_send_success"):
                tp = (event["topic"], event["partition"])
                ends[tp] = max(ends.get(tp, -1), event["offset"])
            return ends

        def consumed_up_to(ends: dict[tuple[str, int], int]) -> bool:
            seen = consumed_offsets(every)
            return all(tp in seen and max(seen[tp]) >= end for tp, end in ends.items())

        def settle(what: str) -> None:
            """Every partition held by the current consumers, then (the bounce's pacing) this
            generation has consumed what the producer had written when it formed."""
            wait_for(lambda: covered(consumers), 60, what,
                     seen=lambda: [(sorted(assigned_now(c)), c.events[-3:]) for c in consumers])
            written = acked_ends()
            wait_for(lambda: consumed_up_to(written), 60, f"{what}: the generation to consume {written}",
                     seen=lambda: {tp: max(o) for tp, o in consumed_offsets(every).items()})

        # The generation consumes while the producer writes (3000 records at 200/s): something written.
        producer.wait_for(lambda p: bool(p.named("producer_send_success")), 60, "the first acknowledgement")
        settle("the three consumers to share the partitions")

        members = table(tools.out(GROUPS, "--describe", "--group", group, "--members"), "GROUP")
        assert len(members) == 3 and sum(int(m["#PARTITIONS"]) for m in members) == partitions
        # The Java consumers fetch in incremental fetch sessions (KIP-227), each its own.
        wait_for(lambda: (scrape(kcoord.metrics_port).value("kcoord_fetch_sessions") or 0) >= 3, 30,
                 "the consumers' fetch sessions", seen=lambda: scrape(kcoord.metrics_port).value("kcoord_fetch_sessions"))

        for i in range(3):
            assert consumers[i].stop() in (0, 143)  # 143: ended by SIGTERM, after its shutdown hook
            assert consumers[i].named("shutdown_complete")
            consumers[i] = consumer(i)
            every.append(consumers[i])
            settle(f"the partitions shared again after bounce {i + 1}")

        producer.wait_for(lambda p: bool(p.named("shutdown_complete")), 60, "the producer finishes")
        acked: dict[tuple[str, int], list[int]] = {}
        for event in producer.named("producer_send_success"):
            acked.setdefault((event["topic"], event["partition"]), []).append(event["offset"])
        assert sum(len(v) for v in acked.values()) == 3000 and not producer.named("producer_send_error")
        ends = {tp: max(offsets) + 1 for tp, offsets in acked.items()}

        def committed() -> dict[tuple[str, int], int]:
            last: dict[tuple[str, int], int] = {}
            for event in sorted((e for c in every for e in c.named("offsets_committed") if e["success"]),
                                key=lambda e: e["timestamp"]):
                for o in event["offsets"]:
                    last[(o["topic"], o["partition"])] = o["offset"]
            return last

        wait_for(lambda: committed() == ends, 60, "the group's commits to reach the log end",
                 seen=lambda: (committed(), ends))
    finally:
        producer.kill()
        for c in consumers:
            c.stop()

    seen = consumed_offsets(every)
    for tp, offsets in acked.items():
        assert set(offsets) <= set(seen[tp]), f"{tp}: acknowledged records never consumed"
    failed_commits = [e for c in every for e in c.named("offsets_committed") if not e["success"]]
    twice = sum(len(v) - len(set(v)) for v in seen.values())
    assert twice == 0 or failed_commits, f"{twice} records consumed twice, though every commit succeeded"

    history: dict[tuple[str, int], list[int]] = {}
    for event in sorted((e for c in every for e in c.named("offsets_committed") if e["success"]),
                        key=lambda e: e["timestamp"]):
        for o in event["offsets"]:
            history.setdefault((o["topic"], o["partition"]), []).append(o["offset"])
    for tp, values in history.items():
        assert values == sorted(values), f"{tp}: committed offsets went back: {values}"

    # The broker's view: the group is empty (every consumer left) and at the log end.
    rows = table(tools.out(GROUPS, "--describe", "--group", group), "GROUP")
    assert {(topic, int(r["PARTITION"])): (int(r["CURRENT-OFFSET"]), r["LAG"])
            for r in rows if r["CURRENT-OFFSET"] != "-"} == {tp: (end, "0") for tp, end in ends.items()}
    assert len(every) == 6 and all(c.named("partitions_assigned") for c in every)


def test_kafka_configs_client_metrics_alter_and_describe(tools: Tools, reference: Tools) -> None:
    """kafka-configs on a client-metrics subscription (KIP-714): --alter sets it, --describe shows
    it as Kafka does, and a bad interval or unknown name is refused as Kafka refuses it."""
    name = f"tools-metrics-{SUFFIX}"
    on_both(tools, reference, lambda t: t.run(
        CONFIGS, "--alter", "--entity-type", "client-metrics", "--entity-name", name,
        "--add-config", "metrics=org.apache.kafka.producer.,interval.ms=1000"))
    ours, theirs = on_both(tools, reference, lambda t: t.out(
        CONFIGS, "--describe", "--entity-type", "client-metrics", "--entity-name", name))
    assert "interval.ms=1000" in ours and "metrics=org.apache.kafka.producer." in ours
    assert ours == theirs
    for bad in ("interval.ms=5", "no.such.config=1"):
        def alter(t: Tools, config: str = bad) -> subprocess.CompletedProcess[str]:
            return t.run(CONFIGS, "--alter", "--entity-type", "client-metrics", "--entity-name", name,
                         "--add-config", config, check=False)
        refused = on_both(tools, reference, alter)
        assert refused[0].returncode == refused[1].returncode != 0
        assert "InvalidRequestException" in refused[0].stdout + refused[0].stderr


def test_streams_groups_describe_reset_offsets_and_delete(tools: Tools, reference: Tools) -> None:
    """kafka-streams-groups (KIP-1071) on a streams group made over the wire, the same on both
    brokers: listed; described (state, members, offsets) while its member runs every task; its
    offsets reset to the earliest once the member left; the group deleted."""
    from kclient.wire_client import WireClient
    from protocol.messages.find_coordinator import FindCoordinatorRequest
    from protocol.messages.offset_commit import OffsetCommitRequest
    from tests.differential.streams_ops import Member, until_tasks

    group, source = f"tools-streams-{SUFFIX}", f"tools-streams-in-{SUFFIX}"
    for side in (tools, reference):
        create(side.bootstrap, source, 2)
        producer = Producer({"bootstrap.servers": side.bootstrap})
        for i in range(10):
            producer.produce(source, b"v%d" % i, partition=i % 2)
        assert producer.flush(10) == 0
        host, port = side.bootstrap.rsplit(":", 1)
        with WireClient(host, int(port), client_id="tools-streams") as c:
            # As a client does first: Kafka creates __consumer_offsets on it, and answers a streams
            # heartbeat NOT_COORDINATOR until then.
            wait_for(lambda c=c: c.call(10, 3, FindCoordinatorRequest(key=group, key_type=0)).error_code == 0, 60,
                     f"the coordinator of {group} on {side.bootstrap}")
            member = Member(c, group, source, "only")
            last = until_tasks(member)
            assert member.active, f"no task on {side.bootstrap}: {last}"
            P = OffsetCommitRequest.Topic.Partition
            committed = c.call(8, 9, OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=member.epoch, member_id=member.mid, topics=[
                    OffsetCommitRequest.Topic(name=source, partitions=[P(partition_index=0, committed_offset=4),
                                                                       P(partition_index=1, committed_offset=5)])]))
            assert [p.error_code for t in committed.topics for p in t.partitions] == [0, 0]
            listed = side.out(STREAMS_GROUPS, "--list")
            assert group in listed.split()
            states = table(side.out(STREAMS_GROUPS, "--describe", "--group", group, "--state"), "GROUP")
            assert [(r["GROUP"], r["STATE"], r["#MEMBERS"]) for r in states] == [(group, "Stable", "1")]
            members = table(side.out(STREAMS_GROUPS, "--describe", "--group", group, "--members"), "GROUP", rest=True)
            assert [(r["GROUP"], r["CLIENT-ID"], r["ASSIGNMENTS"].split()) for r in members] == [
                (group, "tools-streams", ["ACTIVE:", "0:[0,1];", "1:[0,1];"])]
            member.heartbeat(epoch=-1)  # leaves: the group is empty, its offsets may be reset

    def offsets(side: Tools) -> list[tuple[str, str, str]]:
        rows = table(side.out(STREAMS_GROUPS, "--describe", "--group", group, "--offsets"), "GROUP")
        return sorted((r["TOPIC"], r["PARTITION"], r.get("CURRENT-OFFSET", r.get("OFFSET", ""))) for r in rows
                      if r["TOPIC"] == source)

    before = on_both(tools, reference, offsets)
    assert before[0] == before[1], before
    reset = on_both(tools, reference, lambda t: table(t.out(
        STREAMS_GROUPS, "--reset-offsets", "--group", group, "--input-topic", source, "--to-earliest", "--execute"),
        "GROUP"))
    assert [sorted((r["TOPIC"], r["PARTITION"], r["NEW-OFFSET"]) for r in side) for side in reset] == \
        [[(source, "0", "0"), (source, "1", "0")]] * 2, reset
    after = on_both(tools, reference, offsets)
    assert after[0] == after[1], after
    deleted = on_both(tools, reference, lambda t: t.out(STREAMS_GROUPS, "--delete", "--group", group))
    assert deleted[0] == deleted[1], deleted
    assert [group in t.out(STREAMS_GROUPS, "--list").split() for t in (tools, reference)] == [False, False]
