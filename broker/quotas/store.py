"""The client quota configs of a broker: per entity its quota values, as AlterClientQuotas sets
them and DescribeClientQuotas reads them. One JSON document in the data dir, replaced durably
before a change is acknowledged (a cluster keeps them in etcd instead: ``etcd_store.py``).

``resolve`` is Kafka's default quota callback: the quota of a user and client id for one key is
the first of, in order, {user, client-id}, {user, client-id=<default>}, {user},
{user=<default>, client-id}, {user=<default>, client-id=<default>}, {user=<default>},
{client-id}, {client-id=<default>} that sets the key; the level that set it also says who shares
the quota (one sensor per user, per client id, or per pair)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.quotas.model import CLIENT_ID, IP, USER, Component, Entity, matches
from storage import durable_json

QUOTAS_FILE = "kcoord-client-quotas.json"

Values = dict[str, float]


def encode_entity(entity: Entity) -> list[list[str | None]]:
    return [[kind, name] for kind, name in entity]


def decode_entity(doc: list[list[str | None]]) -> Entity:
    return tuple(sorted((str(kind), None if name is None else str(name)) for kind, name in doc))


@dataclass(frozen=True, slots=True)
class Resolved:
    """A quota that applies: its bound and who shares it (the sensor's user and client-id tags,
    an empty string where the level does not distinguish)."""

    bound: float
    user: str
    client_id: str


class QuotaStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else data_dir / QUOTAS_FILE
        self.quotas: dict[Entity, Values] = {}
        # Bumped by every change, so that what was resolved from older configs is worked out again.
        self.generation = 0
        self.listeners: list[Callable[[], None]] = []
        doc = durable_json.read(self.path) if self.path is not None else None
        for item in (doc or {}).get("entities", []):
            self.quotas[decode_entity(item["entity"])] = {str(k): float(v) for k, v in item["values"].items()}

    def document(self, quotas: dict[Entity, Values] | None = None) -> dict[str, object]:
        quotas = self.quotas if quotas is None else quotas
        return {"version": 1, "entities": [{"entity": encode_entity(e), "values": v}
                                           for e, v in sorted(quotas.items(), key=repr)]}

    def save(self, quotas: dict[Entity, Values]) -> None:
        """Makes ``quotas`` durable (before the store holds them: no read sees a change that is not)."""
        if self.path is not None:
            durable_json.write_durably(self.path, self.document(quotas))

    def changed(self) -> None:
        self.generation += 1
        for listener in self.listeners:
            listener()

    def proposed(self, changes: list[tuple[Entity, list[tuple[str, float, bool]]]]) -> dict[Entity, Values]:
        """Every quota as it would be after these changes (sets and removals per entity)."""
        quotas = dict(self.quotas)
        for entity, ops in changes:
            values = dict(quotas.get(entity, {}))
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                quotas[entity] = values
            else:
                quotas.pop(entity, None)
        return quotas

    def replace(self, quotas: dict[Entity, Values]) -> None:
        if quotas != self.quotas:
            self.quotas = quotas
            self.changed()

    def describe(self, components: list[Component], strict: bool) -> list[tuple[Entity, Values]]:
        return [(e, v) for e, v in sorted(self.quotas.items(), key=repr) if matches(e, components, strict)]

    # ---- enforcement -------------------------------------------------------------------------

    def _get(self, key: str, user: str | tuple[()] | None, client: str | tuple[()] | None) -> float | None:
        """The value of ``key`` on the entity of these names; ``()`` for a type the entity lacks,
        None for its default."""
        entity: list[tuple[str, str | None]] = []
        if not isinstance(user, tuple):
            entity.append((USER, user))
        if not isinstance(client, tuple):
            entity.append((CLIENT_ID, client))
        return self.quotas.get(tuple(sorted(entity)), {}).get(key)

    def resolve(self, key: str, user: str, client_id: str) -> Resolved | None:
        none: tuple[()] = ()
        levels: tuple[tuple[str | tuple[()] | None, str | tuple[()] | None, str, str], ...] = (
            (user, client_id, user, client_id),
            (user, None, user, client_id),
            (user, none, user, ""),
            (None, client_id, user, client_id),
            (None, None, user, client_id),
            (None, none, user, ""),
            (none, client_id, "", client_id),
            (none, None, "", client_id),
        )
        for u, c, user_tag, client_tag in levels:
            bound = self._get(key, u, c)
            if bound is not None:
                return Resolved(bound, user_tag, client_tag)
        return None

    def resolve_ip(self, key: str, ip: str) -> float | None:
        return self.quotas.get(((IP, ip),), {}).get(key, self.quotas.get(((IP, None),), {}).get(key))
