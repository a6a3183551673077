"""The tables of the records and log-directory APIs agree with Apache Kafka 4.4's own JSON specs,
read from the kafka-clients jar the reference broker runs (skipped without it): every version both
describe, field by field, as ``test_message_tables`` compares them with kafka-python's copies."""

from __future__ import annotations

import json
import re
import zipfile
from typing import Any

import pytest

from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from protocol.schema import Message, Versions
from testkit.kafka import kafka_libs
from tests.unit.protocol.specs import kafka_view, our_view

MESSAGES = [DeleteRecordsRequest, DeleteRecordsResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
            AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
            DescribeProducersRequest, DescribeProducersResponse]


def jar_spec(name: str) -> dict[str, Any]:
    libs = kafka_libs()
    jars = sorted(libs.glob("kafka-clients-4.4*.jar")) if libs is not None else []
    if not jars:
        pytest.skip("Apache Kafka 4.4's kafka-clients jar is not available")
    with zipfile.ZipFile(jars[0]) as z:
        text = z.read(f"common/message/{name}.json").decode()
    spec: dict[str, Any] = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    return spec


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: m.name)
def test_table_matches_kafka_4_4(msg: Message) -> None:
    spec = jar_spec(msg.name)
    assert msg.api_key == spec["apiKey"]
    assert msg.flexible == Versions.parse(spec["flexibleVersions"])
    valid = Versions.parse(spec["validVersions"])
    assert msg.valid.high == valid.high and msg.valid.low <= valid.low
    for v in msg.versions:
        assert our_view(msg.fields, v) == kafka_view(spec["fields"], v, msg.name), f"{msg.name} v{v}"
