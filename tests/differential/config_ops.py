"""IncrementalAlterConfigs as the differential tests send it, and waiting for it to settle."""

from __future__ import annotations

import itertools
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.differential.harness import Target, retry

# Resource types and IncrementalAlterConfigs operations, as the wire numbers them.
TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental(c: WireClient, kind: int, name: str, *ops: tuple[str, int, str | None],
                validate_only: bool = False) -> list[dict[str, Any]]:
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    answer = c.call(44, 1, IncrementalAlterConfigsRequest(resources=[Resource(
        resource_type=kind, resource_name=name, configs=[Resource.AlterableConfig(name=k, config_operation=op, value=v)
                                                         for k, op, v in ops])], validate_only=validate_only))
    return [{"code": r.error_code, "message": r.error_message, "type": r.resource_type} for r in answer.responses]


_barriers = itertools.count(1)
BARRIER_GROUP = "settle-barrier"  # a group of its own: no scenario describes or lists it


def settle(t: Target) -> None:
    """Kafka answers an alter once its controller committed it; the broker that describes applies it
    from the metadata log a moment later, in the log's order. So a second alter, of a group config
    of its own, is a barrier: once the broker describes the barrier's new value, the alters before
    it are in effect too. kcoord's answer comes after the change is in effect."""
    if t.name != "kafka":
        return
    value = str(45000 + next(_barriers) % 15000)  # within Kafka's consumer session timeout bounds
    c = t.client("settle")
    [answer] = incremental(c, GROUP, BARRIER_GROUP, ("consumer.session.timeout.ms", SET, value))
    assert answer["code"] == 0, answer

    def described() -> str | None:
        result = c.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsRequest.Resource(
            resource_type=GROUP, resource_name=BARRIER_GROUP, configuration_keys=["consumer.session.timeout.ms"])],
            include_synonyms=False, include_documentation=False)).results[0]
        return next((str(e.value) for e in result.configs if e.name == "consumer.session.timeout.ms"), None)

    seen = retry(described, lambda got: got == value, timeout=30)
    assert seen == value, f"Kafka did not apply the barrier alter in 30 s: describes {seen}, set {value}"


