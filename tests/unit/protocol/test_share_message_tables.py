"""The KIP-932 tables agree with Kafka 4.4's own specs: the share-group APIs (76-79, checked with
every other API in ``test_message_tables``), the share-group records of ``__consumer_offsets``
(Kafka's group-coordinator specs) and the share-state records of ``__share_group_state`` (its
share-coordinator specs), as copied into ``tests/kafka_specs``.

A record key's table declares the version that names its record type, where Kafka 4.x declares
version 0 and names the type ``apiKey``; the fields are compared at those two versions.
"""

from __future__ import annotations

import pytest

from protocol.messages import offsets_log_share_groups, share_state_log
from protocol.schema import Message, Versions
from tests.unit.protocol.specs import kafka_spec, kafka_view, our_view

RECORD_MESSAGES: list[Message] = [
    m for module in (offsets_log_share_groups, share_state_log)
    for m in vars(module).values() if isinstance(m, Message)]


def test_every_share_record_table_is_here() -> None:
    assert len(RECORD_MESSAGES) == 16


@pytest.mark.parametrize("msg", RECORD_MESSAGES, ids=lambda m: m.name)
def test_share_record_table_matches_kafka_spec(msg: Message) -> None:
    spec = kafka_spec(msg.name)
    assert msg.api_key is None
    assert msg.flexible == Versions.parse(spec["flexibleVersions"])
    if msg.name.endswith("Key"):
        assert msg.valid == Versions.parse(str(spec["apiKey"]))
        assert our_view(msg.fields, msg.valid.low) == kafka_view(spec["fields"], 0, msg.name)
        return
    assert msg.valid == Versions.parse(spec["validVersions"])
    for v in msg.versions:
        assert our_view(msg.fields, v) == kafka_view(spec["fields"], v, msg.name), f"{msg.name} v{v}"
