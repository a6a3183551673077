"""The one failure an assignor reports, where Kafka's assignors throw ``PartitionAssignorException``."""

from __future__ import annotations


class PartitionAssignorError(Exception):
    """The group cannot be assigned: a member subscribes to a topic the describer does not know,
    or the computation could not place every partition (a bug, not a state of the group)."""
