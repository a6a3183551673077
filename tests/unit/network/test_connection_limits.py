"""The connection limits' arithmetic and parsing: what max.connections, max.connections.per.ip and
its overrides let in, and the descriptors kept for the logs."""

from __future__ import annotations

import re

import pytest
import trio
import trio.testing

from broker.configs.node_config import BrokerConfig, ConfigError
from broker.network.connection_limits import (
    UNLIMITED,
    ConnectionCounter,
    ConnectionLimits,
    EveryInterval,
    LimitsError,
    address_key,
    parse_overrides,
    reserve_for,
)


def test_overrides_are_host_count_pairs_keyed_by_address() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("127.0.0.1:5, localhost:7 ,::1:2") == {"127.0.0.1": 7, "::1": 2}
    assert parse_overrides("[::1]:3,10.0.0.1:0,10.0.0.2:-1") == {"::1": 3, "10.0.0.1": 0, "10.0.0.2": -1}
    assert parse_overrides(":4") == {"127.0.0.1": 4}  # Java's InetAddress.getByName("")


@pytest.mark.parametrize(("text", "message"), [
    # Kafka's messages: those of the Java exceptions its parsing raises.
    ("127.0.0.1", "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 9"),
    ("10.0.0.1:3,,10.0.0.2:4", "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, "
                               "end -1, length 0"),
    ("127.0.0.1:x", 'For input string: "x"'),
    ("127.0.0.1:1_0", 'For input string: "1_0"'),
    ("127.0.0.1:2147483648", 'For input string: "2147483648"'),
    ("no-such-host.invalid:4", "cannot resolve the host of 'no-such-host.invalid:4'"),
])
def test_bad_overrides_are_refused(text: str, message: str) -> None:
    with pytest.raises(LimitsError) as refused:
        parse_overrides(text)
    assert message in str(refused.value)


def test_a_per_address_maximum_of_zero_needs_overrides_as_kafka_says() -> None:
    with pytest.raises(ConfigError, match=re.escape("max.connections.per.ip can be set to zero only if "
                                                    "max.connections.per.ip.overrides property is set.")):
        BrokerConfig.load(overrides=["max.connections.per.ip=0"], environ={})
    config = BrokerConfig.load(overrides=["max.connections.per.ip=0", "max.connections.per.ip.overrides=10.1.2.3:4"], environ={})
    assert config.connection_limits == ConnectionLimits(UNLIMITED, 0, {"10.1.2.3": 4})
    with pytest.raises(ConfigError, match="cannot resolve"):
        BrokerConfig.load(overrides=["max.connections.per.ip.overrides=no-such-host.invalid:1"], environ={})


def test_an_ipv4_client_of_a_dual_stack_listener_is_its_ipv4_address() -> None:
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert address_key("::1") == "::1"
    assert address_key("10.0.0.1") == "10.0.0.1"


def test_the_descriptor_reserve() -> None:
    assert reserve_for(1_048_576) == 104_857
    assert reserve_for(20_000) == 2_000
    assert reserve_for(4_096) == 1_024
    assert reserve_for(1_024) == 512  # half of a small limit
    counter = ConnectionCounter(ConnectionLimits())
    assert counter.cap == UNLIMITED
    counter.keep_descriptors(20_000)
    assert counter.cap == 18_000
    counter.update(ConnectionLimits(max_connections=500))
    assert counter.cap == 500


def test_each_address_is_held_to_its_own_maximum() -> None:
    counter = ConnectionCounter(ConnectionLimits(per_ip=2, per_ip_overrides={"10.0.0.9": 3}))
    assert [counter.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert [counter.admit("10.0.0.9") for _ in range(4)] == [True, True, True, False]
    assert counter.total == 5
    counter.release("10.0.0.1")
    assert counter.admit("10.0.0.1")
    assert counter.by_address == {"10.0.0.1": 2, "10.0.0.9": 3}


@pytest.mark.trio
async def test_a_full_broker_accepts_again_once_a_connection_closes_or_the_maximum_rises() -> None:
    counter = ConnectionCounter(ConnectionLimits(max_connections=2))
    assert counter.admit("a") and counter.admit("b")
    assert counter.full()
    waited: list[str] = []

    async def accept_when_free(name: str) -> None:
        await counter.wait_for_slot()
        counter.admit(name)
        waited.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept_when_free, "c")
        await trio.testing.wait_all_tasks_blocked()
        assert waited == []
        counter.release("a")
        await trio.testing.wait_all_tasks_blocked()
        assert waited == ["c"] and counter.full()
        nursery.start_soon(accept_when_free, "d")
        await trio.testing.wait_all_tasks_blocked()
        assert waited == ["c"]
        counter.update(ConnectionLimits(max_connections=3))
    assert waited == ["c", "d"]
    assert counter.total == 3


def test_a_limit_is_logged_once_a_minute_per_key_with_the_count_since() -> None:
    gate = EveryInterval(60.0, most_keys=2)
    assert [gate.due("a", t) for t in (0.0, 1.0, 59.0)] == [1, 0, 0]
    assert gate.due("b", 5.0) == 1  # each key on its own
    assert gate.due("a", 60.0) == 3  # this one and the two not logged
    assert gate.due("a", 61.0) == 0
    # A third key beyond the two remembered: those logged over a minute ago go first ("b"), then all.
    assert gate.due("c", 70.0) == 1
    assert set(gate.last) == {"a", "c"}
    assert gate.due("d", 71.0) == 1
    assert set(gate.last) == {"d"}
