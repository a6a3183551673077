"""The server-side assignors of KIP-848 consumer groups, by the names members ask for them with
(``ConsumerGroupHeartbeat.ServerAssignor``) and ``group.consumer.assignors`` lists."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from broker.coordinators.group.core.consumer.assignor_api import Assignor

from .errors import PartitionAssignorError
from .range import RangeAssignor
from .uniform import UniformAssignor

ASSIGNORS: Mapping[str, Assignor] = MappingProxyType({
    assignor.name: assignor for assignor in (UniformAssignor(), RangeAssignor())
})

# Kafka's group.consumer.assignors default lists uniform, then range; the first is the default.
DEFAULT_ASSIGNOR = "uniform"

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "PartitionAssignorError", "RangeAssignor", "UniformAssignor"]
