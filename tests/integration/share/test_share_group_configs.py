"""A share group's own configs, set with IncrementalAlterConfigs on its GROUP resource, take effect
over the broker's ``group.share.*`` (confluent-kafka's ShareConsumer and AdminClient over TCP):
``share.auto.offset.reset`` (earliest, latest, by_duration), ``share.isolation.level``,
``share.record.lock.duration.ms``, ``share.delivery.count.limit``, ``share.heartbeat.interval.ms``,
and values outside the broker's bounds are refused as Kafka 4.4 refuses them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import set_group_configs as set_configs
from tests.integration.helpers.metrics import scrape

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
)

from tests.integration.helpers.share import poll_holding  # noqa: E402

# The broker's lock is its longest, 60 s; a group may go down to the broker's minimum, 1 s here.
OVERRIDES = {"group.share.record.lock.duration.ms": "60000",
             "group.share.min.record.lock.duration.ms": "1000", "group.share.heartbeat.interval.ms": "500",
             "group.share.min.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("share-configs")), OVERRIDES)
    b.start_loaded()
    yield b
    b.kill()


def bootstrap(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.port}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(broker: BrokerProcess, prefix: str) -> str:
    name = unique(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap(broker)})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    return name


def set_group_configs(broker: BrokerProcess, group: str, configs: dict[str, str]) -> None:
    set_configs(bootstrap(broker), group, configs)


def produce(broker: BrokerProcess, topic: str, values: list[str], timestamp_ms: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap(broker)})
    for v in values:
        p.produce(topic, value=v.encode(), timestamp=timestamp_ms)
    p.flush(10)


def consumer(broker: BrokerProcess, group: str, topic: str) -> Any:
    c = ShareConsumer({"bootstrap.servers": bootstrap(broker), "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    return c


def poll_until(c: Any, done: Callable[[list[Any]], bool], seconds: float = 15.0,
               ack: int | None = AcknowledgeType.ACCEPT) -> list[Any]:
    """With ``ack=None`` nothing is acknowledged: only ``done`` at the first records, as an
    explicit-mode consumer polls no more while it holds some (``helpers.share.poll_holding``)."""
    got: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done(got):
        for m in c.poll(0.5):
            if m.error() is None:
                got.append(m)
                if ack is not None:
                    c.acknowledge(m, ack)
    return got


def values(messages: list[Any]) -> list[str]:
    return [m.value().decode() for m in messages]


def test_auto_offset_reset_per_group(broker: BrokerProcess) -> None:
    """Records produced before the groups exist: the earliest group reads them all, the group
    left at Kafka's default (latest) none of them, the by_duration group only those no older
    than its duration."""
    topic = make_topic(broker, "reset")
    hour_ago = int(time.time() * 1000) - 3_600_000
    produce(broker, topic, ["old-0", "old-1"], timestamp_ms=hour_ago - 60_000)
    produce(broker, topic, ["new-0", "new-1"])
    earliest, latest, recent = unique("earliest"), unique("latest"), unique("recent")
    set_group_configs(broker, earliest, {"share.auto.offset.reset": "earliest"})
    set_group_configs(broker, recent, {"share.auto.offset.reset": "by_duration:PT1H"})
    consumers = [consumer(broker, g, topic) for g in (earliest, latest, recent)]
    try:
        got_earliest = poll_until(consumers[0], lambda got: len(got) >= 4)
        got_recent = poll_until(consumers[2], lambda got: len(got) >= 2)
        got_latest = poll_until(consumers[1], lambda got: False, seconds=2)
        assert values(got_earliest) == ["old-0", "old-1", "new-0", "new-1"]
        assert values(got_recent) == ["new-0", "new-1"]
        assert got_latest == []
        produce(broker, topic, ["after"])
        assert values(poll_until(consumers[1], lambda got: len(got) >= 1)) == ["after"]
    finally:
        for c in consumers:
            c.close()


def test_lock_duration_and_delivery_limit_per_group(broker: BrokerProcess) -> None:
    """The group's 1 s lock (the broker's is 60 s) expires on a member that stops polling and
    the record goes to the other member, its delivery count up; released there, it is archived
    at the group's delivery limit of 2 instead of coming back a third time."""
    topic = make_topic(broker, "lock")
    group = unique("lock")
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000",
                                      "share.delivery.count.limit": "2"})
    produce(broker, topic, ["poison"])
    holder, other = consumer(broker, group, topic), consumer(broker, group, topic)
    try:
        first = poll_until(holder, lambda got: len(got) >= 1, ack=None)
        assert [m.delivery_count() for m in first] == [1]
        # Redelivered long before the broker's 60 s lock could expire: the group's 1 s one did.
        again = poll_until(other, lambda got: len(got) >= 1, seconds=30, ack=None)
        assert [m.delivery_count() for m in again] == [2]
        other.acknowledge(again[0], AcknowledgeType.RELEASE)
        other.commit_sync()
        assert poll_until(other, lambda got: False, seconds=3) == []  # archived at the group's limit
    finally:
        holder.close()
        other.close()


def test_read_committed_per_group(broker: BrokerProcess) -> None:
    """A read_committed group skips an aborted transaction's records and gets the committed one;
    a read_uncommitted group (the default) gets them all."""
    topic = make_topic(broker, "txn")
    committed_group, uncommitted_group = unique("rc"), unique("ru")
    set_group_configs(broker, committed_group, {"share.auto.offset.reset": "earliest",
                                                "share.isolation.level": "read_committed"})
    set_group_configs(broker, uncommitted_group, {"share.auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": bootstrap(broker), "transactional.id": unique("tx")})
    p.init_transactions(15)
    p.begin_transaction()
    for v in ("aborted-0", "aborted-1"):
        p.produce(topic, value=v.encode())
    p.flush(10)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, value=b"committed")
    p.flush(10)
    p.commit_transaction(15)
    rc, ru = consumer(broker, committed_group, topic), consumer(broker, uncommitted_group, topic)
    try:
        assert values(poll_until(rc, lambda got: len(got) >= 1)) == ["committed"]
        assert poll_until(rc, lambda got: False, seconds=2) == []
        assert values(poll_until(ru, lambda got: len(got) >= 3)) == ["aborted-0", "aborted-1", "committed"]
    finally:
        rc.close()
        ru.close()


def test_heartbeat_interval_per_group(broker: BrokerProcess) -> None:
    """ShareGroupHeartbeat gives a member its group's own heartbeat interval."""
    group = unique("beat")
    set_group_configs(broker, group, {"share.heartbeat.interval.ms": "7000"})
    with WireClient("127.0.0.1", broker.port) as client:
        def beat(group_id: str) -> int:
            response: ShareGroupHeartbeatResponse = client.call(76, 1, ShareGroupHeartbeatRequest(
                group_id=group_id, member_id=uuid.uuid4().hex[:22], member_epoch=0, subscribed_topic_names=["t"]))
            assert response.error_code == 0
            return int(response.heartbeat_interval_ms)

        assert beat(group) == 7000
        assert beat(unique("other")) == 500  # the broker's group.share.heartbeat.interval.ms


@pytest.mark.parametrize(("name", "value", "message"), [
    ("share.record.lock.duration.ms", "500", "Value must be at least 1000"),
    ("share.record.lock.duration.ms", "70000", "share.record.lock.duration.ms must be in the range 1000 to 60000 "
                                                 "inclusive."),
    ("share.delivery.count.limit", "11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
    ("share.partition.max.record.locks", "5000", "share.partition.max.record.locks must be in the range 100 to 4000 "
                                                   "inclusive."),
    ("share.isolation.level", "READ_COMMITTED", "String must be one of: read_committed, read_uncommitted"),
    ("share.auto.offset.reset", "by_duration:-PT1H", "The value must be either 'earliest', 'latest' or of the "
                                                       "format 'by_duration:<PnDTnHnMn.nS>'."),
])
def test_out_of_bounds_values_are_refused(broker: BrokerProcess, name: str, value: str, message: str) -> None:
    with pytest.raises(KafkaException) as refused:
        set_group_configs(broker, unique("bad"), {name: value})
    error = refused.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert message in error.str()


def test_kcoord_groups_describes_a_share_group_with_its_lag(broker: BrokerProcess, capsys: Any) -> None:
    """`kcoord groups` on a share group: its start offset and lag (records not yet acknowledged),
    its members and their assignment, its state."""
    from kcoord.cli import main

    def groups(*args: str) -> str:
        capsys.readouterr()
        assert main(["groups", "--bootstrap-server", bootstrap(broker), *args]) == 0
        return str(capsys.readouterr().out)

    topic, group = make_topic(broker, "lag"), unique("lag")
    set_group_configs(broker, group, {"share.auto.offset.reset": "earliest"})
    produce(broker, topic, [f"m{i}" for i in range(5)])
    c = consumer(broker, group, topic)
    try:
        accepted: list[str] = []

        def accept_three(m: Any) -> bool:
            """m0-m2 accepted; m3 and m4 left acquired, or never delivered: not acknowledged."""
            if len(accepted) == 3:
                return False
            accepted.append(m.value().decode())
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            return True

        poll_holding(c, accept_three, lambda got: len(got) >= 5)
        assert accepted == ["m0", "m1", "m2"]
        c.commit_sync()
        rows = [line.split() for line in groups("--describe", "--group", group).splitlines() if line.strip()]
        assert rows == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [group, topic, "0", "3", "2"]]
        assert scrape(broker.metrics_port).value("kcoord_share_group_lag", group=group, topic=topic,
                                                  partition="0") == 2
        members = [line.split() for line in groups("--describe", "--group", group, "--members").splitlines()
                   if line.strip()]
        assert members[0][:2] == ["GROUP", "CONSUMER-ID"] and members[1][0] == group and members[1][-1] == "1"
        assert group in groups("--describe", "--group", group, "--state")
        assert group in groups("--list", "--type", "Share")
    finally:
        c.close()
