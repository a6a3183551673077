"""The ACL authorizer (Kafka's StandardAuthorizer rules): super users may do anything; otherwise a
matching DENY wins over any ALLOW, an ALLOW of the operation (or of ALL, or of an operation that
implies it) allows, and a resource no ACL names follows ``allow.everyone.if.no.acl.found``.

The ACLs of a single node are one JSON document in the data dir, durable before CreateAcls/DeleteAcls
answer; a cluster keeps them in etcd instead (broker/security/etcd_store.py), with no file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from broker.security.acl_model import (
    IMPLIED_BY,
    OPERATIONS_OF,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from storage import durable_json

ACLS_FILE = "kcoord-acls.json"
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


class Authorizer:
    def __init__(self, data_dir: Path | None, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.path = None if data_dir is None else data_dir / ACLS_FILE
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        doc = (durable_json.read(self.path) if self.path is not None else None) or {}
        self.acls: list[AclBinding] = [AclBinding(**{k: entry[k] for k in FIELDS}) for entry in doc.get("acls", [])]

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        relevant = [a for a in self.acls if a.applies_to(resource_type, name)]
        if not relevant:
            return self.allow_if_no_acl
        mine = [a for a in relevant if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)]
        if any(a.permission == Permission.DENY and a.operation in (operation, Operation.ALL) for a in mine):
            return False
        allowed_by = IMPLIED_BY.get(Operation(operation), frozenset({operation}))
        return any(a.permission == Permission.ALLOW and (a.operation == Operation.ALL or a.operation in allowed_by)
                   for a in mine)

    def describable_topics(self, principal: str, host: str) -> Callable[[str], bool]:
        """Whether the principal may Describe a topic, asked per topic name: what the coordinator
        filters a consumer group's regular expressions with (KAFKA-18813). Not counted as a denial:
        leaving a topic out of a match is not a refused request."""
        def may_describe(topic: str) -> bool:
            return self.authorize(principal, host, Operation.DESCRIBE, ResourceType.TOPIC, topic)
        return may_describe

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation`` on some resource of
        this type? Yes when an ALLOW names it (or ALL) and no DENY of the same principal covers
        what that ALLOW covers (a DENY of ``*``, of the same literal name, or of a prefix of it)."""
        if principal in self.super_users:
            return True
        of_type = [a for a in self.acls if a.resource_type == resource_type]
        if not of_type:
            return self.allow_if_no_acl
        mine = [a for a in of_type if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)
                and a.operation in (operation, Operation.ALL)]
        denies = [a for a in mine if a.permission == Permission.DENY]
        if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies):
            return False

        def denied(allow: AclBinding) -> bool:
            return any((d.pattern_type == PatternType.PREFIXED and allow.resource_name.startswith(d.resource_name))
                       or (d.pattern_type == allow.pattern_type == PatternType.LITERAL
                           and d.resource_name == allow.resource_name) for d in denies)

        return any(a.permission == Permission.ALLOW and not denied(a) for a in mine)

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """Kafka's bit field: bit n set when operation n is allowed on the resource."""
        bits = 0
        for operation in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def add(self, bindings: list[AclBinding]) -> None:
        known = set(self.acls)
        self.acls.extend(b for b in dict.fromkeys(bindings) if b not in known)
        self.save()

    def matching(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter matches (a binding matched by two filters is listed by both)."""
        return [[a for a in self.acls if f.matches(a)] for f in filters]

    def remove(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding matched by two filters is listed by both)."""
        removed = self.matching(filters)
        gone = {a for group in removed for a in group}
        if gone:
            self.acls = [a for a in self.acls if a not in gone]
            self.save()
        return removed

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [a for a in self.acls if acl_filter.matches(a)]

    def save(self) -> None:
        if self.path is None:
            return
        durable_json.write_durably(self.path, {"version": 1, "acls": [
            {k: getattr(a, k) for k in FIELDS} for a in self.acls]})
