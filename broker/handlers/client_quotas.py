"""DescribeClientQuotas and AlterClientQuotas: client quotas as Kafka's admin clients and
kafka-configs manage them, with Kafka's checks and messages (broker/quotas/model.py). A change is
durable before it is acknowledged (in the data dir of a single node, in etcd in a cluster) and is
enforced from the next request on (broker/quotas/enforcement.py)."""

from __future__ import annotations

from broker.cluster.etcd import EtcdError
from broker.log_runtime.runtime import Spawner
from broker.network.router import Request
from broker.observability import logs
from broker.quotas.etcd_store import EtcdQuotaStore
from broker.quotas.model import (
    Component,
    Entity,
    QuotaError,
    check_entity,
    check_filter,
    check_value,
    entity_of,
    java_entity_text,
)
from broker.quotas.store import QuotaStore, Values
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse

Ops = list[tuple[str, float, bool]]


class ClientQuotaApis:
    def __init__(self, store: QuotaStore, etcd_store: EtcdQuotaStore | None, tasks: Spawner) -> None:
        self.store = store
        self.etcd_store = etcd_store
        self.tasks = tasks

    def describe(self, req: Request[DescribeClientQuotasRequest]) -> None:
        components = [Component(c.entity_type, c.match_type, c.match) for c in req.body.components]
        error = check_filter(components)
        if error is not None:
            req.reply.set(DescribeClientQuotasResponse(error_code=error.code, error_message=error.message,
                                                       entries=None))
            return
        Entry = DescribeClientQuotasResponse.EntryData
        req.reply.set(DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message="", entries=[
            Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  values=[Entry.ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in self.store.describe(components, req.body.strict)]))

    def alter(self, req: Request[AlterClientQuotasRequest]) -> None:
        body = req.body
        checked: list[tuple[list[tuple[str, str | None]], Entity, Ops, QuotaError | None]] = []
        seen: dict[Entity, int] = {}
        for entry in body.entries:
            pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
            entity = entity_of(pairs)
            ops: Ops = [(o.key, o.value, o.remove) for o in entry.ops]
            seen[entity] = seen.get(entity, 0) + 1
            checked.append((pairs, entity, ops, self.check(entity, ops)))
        results: list[tuple[list[tuple[str, str | None]], QuotaError | None]] = []
        changes: list[tuple[Entity, Ops]] = []
        for pairs, entity, ops, error in checked:
            if error is None and seen[entity] > 1:
                error = QuotaError(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {java_entity_text(entity)}")
            if error is None and ops:
                changes.append((entity, ops))
            results.append((pairs, error))
        if body.validate_only or not changes:
            self.answer(req, results)
            return
        quotas = self.store.proposed(changes)
        if self.etcd_store is not None:
            self.tasks.spawn(self.alter_in_etcd, req, results, quotas, [e for e, _ in changes])
            return
        self.store.save(quotas)  # durable before the store holds it and before the answer
        self.store.quotas = quotas
        self.store.changed()
        self.altered(req, changes)
        self.answer(req, results)

    @staticmethod
    def check(entity: Entity, ops: Ops) -> QuotaError | None:
        error = check_entity(entity)
        if error is not None:
            return error
        keys = [key for key, _, _ in ops]
        for key, value, remove in ops:
            error = check_value(entity, key, value, remove)
            if error is not None:
                return error
        if len(set(keys)) < len(keys):
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {java_entity_text(entity)}")
        return None

    async def alter_in_etcd(self, req: Request[AlterClientQuotasRequest],
                            results: list[tuple[list[tuple[str, str | None]], QuotaError | None]],
                            quotas: dict[Entity, Values], changed: list[Entity]) -> None:
        assert self.etcd_store is not None
        try:
            await self.etcd_store.alter(quotas, changed)  # committed in etcd before the answer
        except EtcdError as exc:
            logs.warn("quotas.etcd_write_failed", error=str(exc)[:200])
            unavailable = QuotaError(ErrorCode.UNKNOWN_SERVER_ERROR, "etcd is unavailable")
            results = [(pairs, error or unavailable) for pairs, error in results]
        else:
            logs.event("quotas.altered", entities=len(changed), principal=req.conn.principal)
        self.answer(req, results)

    def altered(self, req: Request[AlterClientQuotasRequest], changes: list[tuple[Entity, Ops]]) -> None:
        logs.event("quotas.altered", entities=";".join(java_entity_text(e) for e, _ in changes)[:500],
                   principal=req.conn.principal)

    @staticmethod
    def answer(req: Request[AlterClientQuotasRequest],
               results: list[tuple[list[tuple[str, str | None]], QuotaError | None]]) -> None:
        Entry = AlterClientQuotasResponse.EntryData
        req.reply.set(AlterClientQuotasResponse(entries=[
            Entry(error_code=ErrorCode.NONE if error is None else error.code,
                  error_message=None if error is None else error.message,
                  entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in pairs])
            for pairs, error in results]))
