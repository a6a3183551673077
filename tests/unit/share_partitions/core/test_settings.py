"""``share.auto.offset.reset`` read as Kafka 4.4 reads it (each case checked against Kafka's
GroupConfig.validate and ShareGroupAutoOffsetResetStrategy), and the broker's share bounds
checked at startup as Kafka's ShareGroupConfig checks them."""

from __future__ import annotations

import pytest

from broker.configs.node_config import BrokerConfig, ConfigError
from broker.share_partitions.core.settings import BY_DURATION, EARLIEST, LATEST, Reset, parse_reset


@pytest.mark.parametrize(("text", "expected"), [
    ("earliest", Reset(EARLIEST)),
    (" latest", Reset(LATEST)),
    ("by_duration:PT1H", Reset(BY_DURATION, 3_600_000)),
    ("by_duration:pt1h", Reset(BY_DURATION, 3_600_000)),
    ("by_duration:PT1.5S", Reset(BY_DURATION, 1500)),
    ("by_duration:PT1,5S", Reset(BY_DURATION, 1500)),
    ("by_duration:+P1D", Reset(BY_DURATION, 86_400_000)),
    ("by_duration:P1DT2H3M4.5S", Reset(BY_DURATION, 93_784_500)),
    ("by_duration:PT0S", Reset(BY_DURATION, 0)),
    ("by_duration:PT1H-30M", Reset(BY_DURATION, 1_800_000)),
    ("Latest", None),
    ("EARLIEST", None),
    ("BY_DURATION:P1D", None),
    ("by_duration:", None),
    ("by_duration: PT1H", None),
    ("by_duration:PT-1H", None),
    ("by_duration:-P1D", None),
    ("by_duration:P1DT", None),
    ("by_duration:P1W", None),
    ("by_duration:1h", None),
])
def test_reset_values_as_kafka_reads_them(text: str, expected: Reset | None) -> None:
    assert parse_reset(text) == expected


@pytest.mark.parametrize(("overrides", "message"), [
    (["group.share.record.lock.duration.ms=1000"],
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    (["group.share.record.lock.duration.ms=70000"],
     "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms"),
    (["group.share.delivery.count.limit=3", "group.share.min.delivery.count.limit=4"],
     "group.share.delivery.count.limit must be greater than or equal to group.share.min.delivery.count.limit"),
    (["group.share.min.record.lock.duration.ms=500"], "below the minimum 1000"),
    (["group.share.max.record.lock.duration.ms=4000000"], "above the maximum 3600000"),
])
def test_broker_share_bounds_checked_at_startup(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load(None, overrides, environ={})


def test_short_locks_when_the_minimum_allows_them() -> None:
    c = BrokerConfig.load(None, ["group.share.record.lock.duration.ms=1000",
                                 "group.share.min.record.lock.duration.ms=1000"], environ={})
    assert c.get_int("group.share.record.lock.duration.ms") == 1000
