"""Authorizer.authorize_any, Kafka's authorizeByResourceType: InitProducerId without a
transactional id is allowed to a principal who may write some topic."""

from __future__ import annotations

from broker.security.acl_model import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.security.authorizer import Authorizer


def _authorizer(*acls: AclBinding, allow_if_no_acl: bool = False) -> Authorizer:
    a = Authorizer(None, frozenset({"User:admin"}), allow_if_no_acl)
    a.acls = list(acls)
    return a


def _topic(name: str, permission: int, pattern: int = PatternType.LITERAL, operation: int = Operation.WRITE,
           principal: str = "User:alice") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


def _may_write_some_topic(a: Authorizer, principal: str = "User:alice") -> bool:
    return a.authorize_any(principal, "10.0.0.1", Operation.WRITE, ResourceType.TOPIC)


def test_an_allow_on_any_topic_is_enough() -> None:
    assert _may_write_some_topic(_authorizer(_topic("orders", Permission.ALLOW)))
    assert _may_write_some_topic(_authorizer(_topic("orders-", Permission.ALLOW, PatternType.PREFIXED)))
    assert _may_write_some_topic(_authorizer(_topic("x", Permission.ALLOW, operation=Operation.ALL)))
    assert not _may_write_some_topic(_authorizer(_topic("orders", Permission.ALLOW, operation=Operation.READ)))
    assert not _may_write_some_topic(_authorizer(_topic("orders", Permission.ALLOW, principal="User:bob")))


def test_a_deny_covering_the_allow_takes_it_away() -> None:
    assert not _may_write_some_topic(_authorizer(_topic("orders", Permission.ALLOW), _topic("*", Permission.DENY)))
    assert not _may_write_some_topic(_authorizer(_topic("orders-eu", Permission.ALLOW),
                                                 _topic("orders-", Permission.DENY, PatternType.PREFIXED)))
    assert not _may_write_some_topic(_authorizer(_topic("orders", Permission.ALLOW), _topic("orders", Permission.DENY)))
    # A deny of another topic leaves the allow standing.
    assert _may_write_some_topic(_authorizer(_topic("orders", Permission.ALLOW), _topic("billing", Permission.DENY)))


def test_super_users_and_no_acls_at_all() -> None:
    assert _may_write_some_topic(_authorizer(), "User:admin")
    assert not _may_write_some_topic(_authorizer())
    assert _may_write_some_topic(_authorizer(allow_if_no_acl=True))
