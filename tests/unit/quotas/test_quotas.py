"""Client quotas without a broker: the sampled rate and its throttle time, Kafka's resolution order
of user and client-id quotas, the checks of AlterClientQuotas and DescribeClientQuotas, and the
store's durability."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.quotas.model import (
    Component,
    check_entity,
    check_filter,
    check_value,
    entity_of,
    java_entity_text,
    matches,
)
from broker.quotas.rate import Rate, throttle_ms
from broker.quotas.store import QuotaStore


def test_a_steady_rate_is_measured_over_the_windows() -> None:
    rate = Rate(samples=11, window_ms=1000)
    for second in range(20):
        rate.record(1000.0, second * 1000)
    # 11 windows of 1000 bytes each, from the oldest window's start to now.
    assert rate.measure(19_000) == pytest.approx(11_000 / 10.0)


def test_a_burst_at_the_start_is_divided_by_at_least_samples_minus_one_windows() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(10_000.0, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(1000.0)


def test_throttle_time_brings_the_rate_back_to_the_bound() -> None:
    rate = Rate(samples=2, window_ms=1000)
    rate.record(3000.0, 0)
    # 3000 bytes over the padded 1 s window against 1000 B/s: 2 s more are needed.
    assert throttle_ms(rate, 1000.0, 0) == 2000
    assert throttle_ms(rate, 3000.0, 0) == 0
    # With nothing recorded for longer than all the windows, the rate is back to zero.
    assert rate.measure(5000) == 0.0


def quota_store(tmp_path: Path, *entries: tuple[list[tuple[str, str | None]], str, float]) -> QuotaStore:
    store = QuotaStore(tmp_path)
    changes = [(entity_of(pairs), [(key, value, False)]) for pairs, key, value in entries]
    store.quotas = store.proposed(changes)
    return store


@pytest.mark.parametrize(("configured", "expected"), [
    ([("user", "alice"), ("client-id", "app")], ("alice", "app")),
    ([("user", "alice"), ("client-id", None)], ("alice", "app")),
    ([("user", "alice")], ("alice", "")),
    ([("user", None), ("client-id", "app")], ("alice", "app")),
    ([("user", None), ("client-id", None)], ("alice", "app")),
    ([("user", None)], ("alice", "")),
    ([("client-id", "app")], ("", "app")),
    ([("client-id", None)], ("", "app")),
])
def test_each_level_of_kafkas_resolution_order_applies_with_its_sharing(
        tmp_path: Path, configured: list[tuple[str, str | None]], expected: tuple[str, str]) -> None:
    store = quota_store(tmp_path, (configured, "producer_byte_rate", 500.0))
    resolved = store.resolve("producer_byte_rate", "alice", "app")
    assert resolved is not None
    assert (resolved.bound, resolved.user, resolved.client_id) == (500.0, *expected)
    assert store.resolve("consumer_byte_rate", "alice", "app") is None


def test_the_most_specific_level_wins(tmp_path: Path) -> None:
    store = quota_store(tmp_path, ([("client-id", None)], "producer_byte_rate", 1.0),
                        ([("user", None)], "producer_byte_rate", 2.0),
                        ([("user", "alice")], "producer_byte_rate", 3.0),
                        ([("user", "alice"), ("client-id", "app")], "producer_byte_rate", 4.0))
    assert store.resolve("producer_byte_rate", "alice", "app").bound == 4.0  # type: ignore[union-attr]
    assert store.resolve("producer_byte_rate", "alice", "other").bound == 3.0  # type: ignore[union-attr]
    assert store.resolve("producer_byte_rate", "bob", "other").bound == 2.0  # type: ignore[union-attr]


def test_alterations_are_durable_and_read_back(tmp_path: Path) -> None:
    store = quota_store(tmp_path, ([("user", "alice")], "producer_byte_rate", 1024.0),
                        ([("ip", None)], "connection_creation_rate", 5.0))
    store.save(store.quotas)
    again = QuotaStore(tmp_path)
    assert again.quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0},
                            (("ip", None),): {"connection_creation_rate": 5.0}}
    assert again.resolve_ip("connection_creation_rate", "10.0.0.1") == 5.0


@pytest.mark.parametrize(("pairs", "key", "value", "message"), [
    ([], "producer_byte_rate", 1.0, "Invalid empty client quota entity"),
    ([("group", "g")], "producer_byte_rate", 1.0, "Unhandled client quota entity type: group"),
    ([("ip", "1.2.3.4"), ("user", "x")], "connection_creation_rate", 1.0,
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("ip", "not-an-ip")], "connection_creation_rate", 1.0, "not-an-ip is not a valid IP or resolvable host."),
    ([("user", "")], "producer_byte_rate", 1.0, "Empty user not supported"),
    ([("user", "u")], "foo", 1.0, "Invalid configuration key foo"),
    ([("ip", "1.2.3.4")], "producer_byte_rate", 1.0, "Invalid configuration key producer_byte_rate"),
    ([("user", "u")], "producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
    ([("user", "u")], "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ([("user", "u")], "request_percentage", -1.0, "Quota request_percentage must be greater than 0"),
    ([("user", "u")], "producer_byte_rate", 1e30, "Proposed value for producer_byte_rate is too large for a LONG."),
])
def test_alter_checks_answer_as_kafka_does(pairs: list[tuple[str, str | None]], key: str, value: float,
                                           message: str) -> None:
    entity = entity_of(pairs)
    error = check_entity(entity) or check_value(entity, key, value, False)
    assert error is not None and (error.code, error.message) == (42, message)


def test_fractional_doubles_and_removals_pass() -> None:
    entity = entity_of([("user", "u"), ("client-id", None)])
    assert check_entity(entity) is None
    assert check_value(entity, "request_percentage", 50.5, False) is None
    assert check_value(entity, "producer_byte_rate", 0.0, True) is None
    assert java_entity_text(entity_of([("user", "dk")])) == "ClientQuotaEntity(entries={user=dk})"


def test_describe_filters_match_as_kafkas() -> None:
    alice_app = entity_of([("user", "alice"), ("client-id", "app")])
    default_user = entity_of([("user", None)])
    any_user = [Component("user", 2, None)]
    assert matches(alice_app, any_user, strict=False) and matches(default_user, any_user, strict=False)
    assert not matches(alice_app, any_user, strict=True)
    assert matches(default_user, [Component("user", 1, None)], strict=True)
    assert not matches(alice_app, [Component("user", 0, "bob")], strict=False)
    assert not matches(entity_of([("ip", None)]), [], strict=True)
    assert check_filter([Component("group", 2, None)]).code == 35  # type: ignore[union-attr]
    assert check_filter([Component("user", 0, None)]).code == 42  # type: ignore[union-attr]
    assert check_filter([Component("ip", 2, None), Component("user", 2, None)]).code == 42  # type: ignore[union-attr]


def test_connections_over_their_addresss_rate_are_refused_and_not_counted(tmp_path: Path) -> None:
    from broker.quotas.enforcement import QuotaEnforcer

    store = quota_store(tmp_path, ([("ip", None)], "connection_creation_rate", 2.0),
                        ([("ip", "10.0.0.9")], "connection_creation_rate", 100.0))
    now = [0]
    enforcer = QuotaEnforcer(store, samples=2, window_s=1, clock=lambda: now[0])
    assert [enforcer.connection_throttle_ms("10.0.0.1") for _ in range(3)] == [0, 0, 500]
    assert enforcer.ip_sensors["10.0.0.1"].throttled == 1
    assert all(enforcer.connection_throttle_ms("10.0.0.9") == 0 for _ in range(50))
    now[0] = 3000  # every window has passed
    assert enforcer.connection_throttle_ms("10.0.0.1") == 0
    assert QuotaEnforcer(QuotaStore(tmp_path / "none"), 2, 1).connection_throttle_ms("10.0.0.1") == 0


def test_sensors_unused_for_an_hour_are_dropped(tmp_path: Path) -> None:
    from broker.quotas.enforcement import PRODUCE, QuotaEnforcer

    store = quota_store(tmp_path, ([("client-id", None)], "producer_byte_rate", 100.0))
    now = [1000]
    enforcer = QuotaEnforcer(store, samples=2, window_s=1, clock=lambda: now[0])
    assert enforcer.record(PRODUCE, "u", "app", 300.0, now[0])[0] == 2000
    assert list(enforcer.sensors) == [("Produce", "", "app")]
    now[0] += 3_600_001
    list(enforcer.families())
    assert enforcer.sensors == {}


def _request(api: object, version: int, body: object, client_id: str, mutes: list[tuple[float, bool]]) -> object:
    from broker.network.reply import Reply
    from broker.network.router import ConnectionInfo, Request

    conn = ConnectionInfo(1, "127.0.0.1", 1)
    conn.mute = lambda seconds, hold: mutes.append((seconds, hold))
    reply = Reply(api, version, 1, False)  # type: ignore[arg-type]
    return Request(body, reply, api.api_key, version, client_id, "User:alice", "PLAINTEXT", "127.0.0.1", conn)  # type: ignore[attr-defined]


def test_a_throttled_fetch_is_answered_empty_with_its_throttle_time_and_a_muted_connection(tmp_path: Path) -> None:
    from broker.quotas.enforcement import QuotaEnforcer
    from protocol.codec import decode
    from protocol.messages.fetch import FetchRequest, FetchResponse

    store = quota_store(tmp_path, ([("user", "alice")], "consumer_byte_rate", 1000.0))
    enforcer = QuotaEnforcer(store, samples=2, window_s=1, clock=lambda: 5000)
    mutes: list[tuple[float, bool]] = []
    req: Any = _request(FetchResponse, 12, FetchRequest(), "app", mutes)
    done = enforcer.observe(req, 100)
    assert done is not None
    done()
    P = FetchResponse.FetchableTopicResponse.PartitionData
    req.reply.set(FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[P(partition_index=0, records=b"r" * 3000)])]))
    answer = decode(FetchResponse, req.reply.data[8:], 12)
    # 3000 bytes over the padded 1 s window against 1000 B/s: 2 s; the data is not sent, nor counted.
    assert (answer.throttle_time_ms, answer.responses) == (2000, [])
    assert mutes == [(2.0, False)]
    assert enforcer.sensors[("Fetch", "alice", "")].rate.measure(5000) == 0.0


def test_request_time_is_throttled_at_most_one_window(tmp_path: Path) -> None:
    from broker.quotas.enforcement import REQUEST, QuotaEnforcer

    store = quota_store(tmp_path, ([("client-id", "busy")], "request_percentage", 1.0))
    enforcer = QuotaEnforcer(store, samples=11, window_s=1, clock=lambda: 0)
    # 5 s of handler time in one request is 50% of a thread over the padded 10 s: far over 1%.
    throttle, sensor = enforcer.record(REQUEST, "u", "busy", 500.0, 0)
    assert sensor is not None and throttle == 1000


def test_a_fetch_asks_for_no_more_than_its_quota_lets_through(tmp_path: Path) -> None:
    from broker.quotas.enforcement import QuotaEnforcer
    from protocol.messages.fetch import FetchRequest, FetchResponse

    store = quota_store(tmp_path, ([("client-id", "app")], "consumer_byte_rate", 1000.0))
    enforcer = QuotaEnforcer(store, samples=11, window_s=1, clock=lambda: 0)
    req: Any = _request(FetchResponse, 12, FetchRequest(max_bytes=50_000_000), "app", [])
    enforcer.observe(req, 100)
    assert req.body.max_bytes == 10_000  # 1000 B/s over 10 windows of 1 s
    other: Any = _request(FetchResponse, 12, FetchRequest(max_bytes=50_000_000), "other", [])
    enforcer.observe(other, 100)
    assert other.body.max_bytes == 50_000_000
