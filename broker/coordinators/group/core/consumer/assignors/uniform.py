"""Kafka's ``uniform`` assignor, the default: partition counts as even as the subscriptions allow,
and members keep what they hold wherever balance permits.

Racks are not considered (Kafka's uniform assignor does not read them either).
"""

from __future__ import annotations

from broker.coordinators.group.core.consumer.assignor_api import Assignment, GroupSpec, TopicDescriber

from .ordering import is_homogeneous
from .uniform_heterogeneous import assign_heterogeneous
from .uniform_homogeneous import assign_homogeneous


class UniformAssignor:
    name = "uniform"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        if not group.members:
            return {}
        if is_homogeneous(group):
            return assign_homogeneous(group, topics)
        return assign_heterogeneous(group, topics)
