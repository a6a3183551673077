"""Quota entities and keys as Kafka's AlterClientQuotas and DescribeClientQuotas speak of them, and
their validation with Kafka's errors and messages. Pure: no I/O.

An entity is a set of (entity type, name) pairs, a name of None being the default entity of that
type: ``{user=alice}``, ``{user=alice, client-id=<default>}``, ``{ip=10.0.0.1}``. Kept as a tuple
sorted by entity type, so that equal entities are equal keys."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from protocol.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# The keys of user and client-id entities and of ip entities, with Kafka's config type of each
# (a LONG or INT value must be whole and fit; a DOUBLE may be fractional).
CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
               CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
_LIMITS = {"LONG": 2.0 ** 63 - 1, "INT": 2.0 ** 31 - 1}
_ARTICLE = {"LONG": "a", "INT": "an"}

# DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: list[tuple[str, str | None]]) -> Entity:
    """One entity from the pairs of a request; a type named twice keeps its last name, as Kafka's
    map of the entity does."""
    return tuple(sorted(dict(pairs).items()))


def java_entity_text(entity: Entity) -> str:
    """How Kafka prints an entity in its messages: ``ClientQuotaEntity(entries={user=dk})``, in the
    iteration order of a Java HashMap of that many entries."""
    def bucket(name: str) -> int:
        h = 0
        for ch in name:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 15

    ordered = sorted(entity, key=lambda p: bucket(p[0]))
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in ordered) + "})"


@dataclass(frozen=True, slots=True)
class QuotaError:
    code: int
    message: str


def check_entity(entity: Entity) -> QuotaError | None:
    """Kafka's checks of the entity of an AlterClientQuotas entry."""
    if not entity:
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    types = dict(entity)
    for kind in types:
        if kind not in ENTITY_TYPES:
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}")
    if IP in types and len(types) > 1:
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should"
                                                     "not be combined with User or ClientId")
    if types.get(USER) == "":
        return QuotaError(ErrorCode.INVALID_REQUEST, "Empty user not supported")
    ip = types.get(IP)
    if ip is not None and not is_ip(ip):
        return QuotaError(ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
    return None


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def keys_for(entity: Entity) -> dict[str, str]:
    return IP_KEYS if any(kind == IP for kind, _ in entity) else CLIENT_KEYS


def check_value(entity: Entity, key: str, value: float, remove: bool) -> QuotaError | None:
    """Kafka's checks of one quota op: the key must be one of the entity's, a value to set must
    be positive, and whole (and in range) for a LONG or INT key."""
    kind = keys_for(entity).get(key)
    if kind is None:
        return QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if remove:
        return None
    if kind in _LIMITS:
        if value != value or value in (float("inf"), float("-inf")) or value != int(value):
            return QuotaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")
        if value > _LIMITS[kind]:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              f"Proposed value for {key} is too large for {_ARTICLE[kind]} {kind}.")
    if not value > 0:
        return QuotaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    return None


# ---- DescribeClientQuotas ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def check_filter(components: list[Component]) -> QuotaError | None:
    """Kafka's checks of a DescribeClientQuotas filter."""
    seen: set[str] = set()
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            return QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              "Request specified MATCH_TYPE_EXACT, but set match string to null.")
        if c.match_type == MATCH_DEFAULT and c.match is not None:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
        if c.match_type == MATCH_ANY and c.match is not None:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
        if c.entity_type in seen:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        seen.add(c.entity_type)
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                     "component should not be used with user or clientId filter "
                                                     "component.")
    return None


def matches(entity: Entity, components: list[Component], strict: bool) -> bool:
    """Every component matches one of the entity's pairs (an exact name, the default, or any name
    including the default); a strict filter also wants no pair of a type it does not name."""
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        if c.match_type == MATCH_EXACT and name != c.match:
            return False
        if c.match_type == MATCH_DEFAULT and name is not None:
            return False
    return not strict or len(names) == len(components)
