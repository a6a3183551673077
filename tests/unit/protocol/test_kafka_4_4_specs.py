"""The tables of the topology and feature APIs, ApiVersions (v5) and UnregisterBroker against the
JSON specs inside Kafka 4.4's own kafka-clients jar (the reference broker's), not a client
library's copy: every version, field by field, with the comparison of test_message_tables. Skipped
where Kafka's jars are not fetched."""

from __future__ import annotations

import json
import re
import zipfile
from typing import Any

import pytest

from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from protocol.schema import Message, Versions
from testkit.kafka import kafka_libs
from tests.unit.protocol.specs import kafka_view, our_view

MESSAGES = [DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ElectLeadersRequest,
            ElectLeadersResponse, AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
            ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, DescribeQuorumRequest,
            DescribeQuorumResponse, UpdateFeaturesRequest, UpdateFeaturesResponse, ApiVersionsRequest,
            ApiVersionsResponse, UnregisterBrokerRequest, UnregisterBrokerResponse, DeleteGroupsRequest,
            DeleteGroupsResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse]


def jar_spec(name: str) -> dict[str, Any]:
    libs = kafka_libs()
    jars = sorted(libs.glob("kafka-clients-*.jar")) if libs is not None else []
    if not jars:
        pytest.skip("Apache Kafka's jars are not fetched (bash scripts/kafka.sh)")
    with zipfile.ZipFile(jars[0]) as jar:
        text = jar.read(f"common/message/{name}.json").decode()
    spec: dict[str, Any] = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}

    def inline(fields: list[dict[str, Any]]) -> None:
        for fl in fields:
            elem = fl["type"].removeprefix("[]")
            if "fields" not in fl and elem in common:
                fl["fields"] = common[elem]
            if "fields" in fl:
                inline(fl["fields"])

    inline(spec["fields"])
    return spec


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: m.name)
def test_table_matches_kafka_4_4_jar(msg: Message) -> None:
    spec = jar_spec(msg.name)
    assert msg.api_key == spec["apiKey"]
    assert msg.valid == Versions.parse(spec["validVersions"])
    assert msg.flexible == Versions.parse(spec["flexibleVersions"])
    for v in msg.versions:
        assert our_view(msg.fields, v) == kafka_view(spec["fields"], v, msg.name), f"{msg.name} v{v}"
