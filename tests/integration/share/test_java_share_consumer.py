"""Kafka 4.4's Java KafkaShareConsumer against kcoord: two share consumers in one group on one
partition, explicit acknowledgements, no record accepted twice, a released record delivered again
with delivery count 2. The program is ``tests/java/ShareClients.java``, compiled with the other
Java programs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testkit.kafka import java_command
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.share import OVERRIDES

pytestmark = [pytest.mark.timeout(240)]


def run_share(classes: Path, libs: Path, *args: str) -> list[dict[str, Any]]:
    import json

    done = subprocess.run(java_command(libs, "ShareClients", *args, classes=classes), capture_output=True,
                          text=True, timeout=180)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    errors = [e for e in events if e["event"] == "error"]
    assert done.returncode == 0 and not errors, f"{errors}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return events


def test_two_java_share_consumers(broker_factory: Callable[..., BrokerProcess], kafka_libs: Path,
                                  java_classes: Path) -> None:
    broker = broker_factory(OVERRIDES)
    create_topic(broker.bootstrap, "jq", 1)
    events = run_share(java_classes, kafka_libs, "share", broker.bootstrap, "jq", "jsg", "20")
    (summary,) = [e for e in events if e["event"] == "share"]
    assert summary["accepted"] == 20 and summary["accepted_twice"] == 0
    assert summary["deliveries"] == 21  # r0 twice: released once
    assert [e["delivery_count"] for e in events if e["event"] == "redelivered"] == [2]
