"""The ACLs Kafka checks for streams groups: Read on the group, Describe on every topic a joining
member's topology names, and (before the broker creates internal topics) Create on the cluster or
else on each topic."""

from __future__ import annotations

from typing import Any

from broker.handlers.request_checks import RequestChecks
from broker.handlers.streams_groups import heartbeat_error, may_create_topics
from broker.network.router import Request
from broker.security.acl_model import (
    CLUSTER_NAME,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from broker.security.authorizer import Authorizer
from broker.topics.catalog import TopicCatalog
from protocol.errors import ErrorCode
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Req

ALICE = "User:alice"


class _Reply:
    def __init__(self) -> None:
        self.response: Any = None
        self.amend = None

    def set(self, response: Any) -> None:
        self.response = response


def _acl(resource: int, name: str, operation: int, pattern: int = PatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, ALICE, "*", operation, Permission.ALLOW)


def _checks(*acls: AclBinding) -> RequestChecks:
    authorizer = Authorizer(None, frozenset(), False)
    authorizer.acls = list(acls)
    return RequestChecks(TopicCatalog.__new__(TopicCatalog), authorizer, None)  # type: ignore[arg-type]


def _join() -> Req:
    T = Req.Topology.Subtopology
    topology = Req.Topology(epoch=1, subtopologies=[
        T(subtopology_id="0", source_topics=["input"], source_topic_regex=[], state_changelog_topics=[],
          repartition_sink_topics=["app-r-repartition"], repartition_source_topics=[], copartition_groups=[]),
        T(subtopology_id="1", source_topics=[], source_topic_regex=[], repartition_sink_topics=[],
          copartition_groups=[],
          state_changelog_topics=[T.TopicInfo(name="app-s-changelog", partitions=0, replication_factor=0,
                                              topic_configs=[])],
          repartition_source_topics=[T.TopicInfo(name="app-r-repartition", partitions=0, replication_factor=0,
                                                 topic_configs=[])])])
    return Req(group_id="app", member_id="m", member_epoch=0, endpoint_information_epoch=0,
               rebalance_timeout_ms=1000, topology=topology, active_tasks=[], standby_tasks=[], warmup_tasks=[],
               process_id="p", client_tags=[])


def _check(checks: RequestChecks, body: Req) -> Any:
    reply = _Reply()
    req = Request(body, reply, 88, 1, "client", ALICE, "PLAINTEXT", "127.0.0.1", None)  # type: ignore[arg-type]
    denied = checks.streams_group_heartbeat(req, heartbeat_error)
    return reply.response if denied else None


def test_read_on_the_group_comes_first() -> None:
    answer = _check(_checks(_acl(ResourceType.TOPIC, "*", Operation.ALL)), _join())
    assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_every_topic_of_the_topology_must_be_describable() -> None:
    group = _acl(ResourceType.GROUP, "app", Operation.READ)
    answer = _check(_checks(group, _acl(ResourceType.TOPIC, "input", Operation.READ)), _join())
    assert answer.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert answer.error_message == "The following topics are not authorized: app-r-repartition, app-s-changelog"
    allowed = _checks(group, _acl(ResourceType.TOPIC, "input", Operation.READ),
                      _acl(ResourceType.TOPIC, "app-", Operation.DESCRIBE, PatternType.PREFIXED))
    assert _check(allowed, _join()) is None
    steady = _join()
    steady.member_epoch, steady.topology = 1, None
    assert _check(_checks(group), steady) is None  # no topology, no topic to check


def test_internal_topics_need_create_on_the_cluster_or_on_each_topic() -> None:
    def may(*acls: AclBinding) -> Any:
        authorizer = Authorizer(None, frozenset(), False)
        authorizer.acls = list(acls)
        return may_create_topics(authorizer)(ALICE, "127.0.0.1")

    assert may(_acl(ResourceType.CLUSTER, CLUSTER_NAME, Operation.CREATE))("app-s-changelog")
    on_prefix = may(_acl(ResourceType.TOPIC, "app-", Operation.CREATE, PatternType.PREFIXED))
    assert on_prefix("app-s-changelog") and not on_prefix("other-changelog")
    assert not may(_acl(ResourceType.TOPIC, "*", Operation.DESCRIBE))("app-s-changelog")


def test_a_topology_description_update_needs_read_on_the_group() -> None:
    """KIP-1331: a push does not modify the group, so Read on it is enough, as in Kafka 4.4; the
    refusal carries Kafka's message."""
    from broker.handlers.streams_groups import topology_description_update_error
    from protocol.messages.streams_group_topology_description_update import (
        StreamsGroupTopologyDescriptionUpdateRequest as Update,
    )

    body = Update(group_id="app", member_id="m", topology_epoch=1,
                  topology_description=Update.TopologyDescription(subtopologies=[], global_stores=[]))

    def check(checks: RequestChecks) -> Any:
        reply = _Reply()
        req = Request(body, reply, 93, 0, "client", ALICE, "PLAINTEXT", "127.0.0.1", None)  # type: ignore[arg-type]
        denied = checks.group_read(req, topology_description_update_error)
        return reply.response if denied else None

    answer = check(_checks(_acl(ResourceType.GROUP, "app", Operation.DESCRIBE)))
    assert (answer.error_code, answer.error_message) == (ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                         "Group authorization failed.")
    assert check(_checks(_acl(ResourceType.GROUP, "app", Operation.READ))) is None
