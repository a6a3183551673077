"""Client quotas altered and described through the admin API."""

from __future__ import annotations

from typing import Any

from kclient.wire_client import WireClient
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse

Entry = AlterClientQuotasRequest.EntryData


def alter(port: int, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
          validate_only: bool = False) -> list[tuple[int, str | None]]:
    with WireClient("127.0.0.1", port) as c:
        answer: AlterClientQuotasResponse = c.call(49, 1, AlterClientQuotasRequest(validate_only=validate_only, entries=[
            Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                  ops=[Entry.OpData(key=k, value=v, remove=r) for k, v, r in ops])]))
    return [(e.error_code, e.error_message) for e in answer.entries]


def describe(port: int, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    with WireClient("127.0.0.1", port) as c:
        answer: DescribeClientQuotasResponse = c.call(48, 1, DescribeClientQuotasRequest(strict=strict, components=[
            DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components]))
    if answer.error_code:
        return answer.error_code, answer.error_message
    return sorted((([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
                   for entry in answer.entries or []), key=repr)


