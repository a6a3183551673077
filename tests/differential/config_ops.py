"""IncrementalAlterConfigs as the differential tests send it, and waiting for it to settle."""

from __future__ import annotations

import time
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.differential.harness import Target

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


def settle(t: Target) -> None:
    """Kafka answers an alter once its controller committed it; the broker that describes applies it
    from the metadata log a moment later. kcoord's answer comes after the change is in effect."""
    if t.name == "kafka":
        time.sleep(0.5)


