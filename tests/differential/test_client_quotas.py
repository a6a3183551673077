"""AlterClientQuotas and DescribeClientQuotas against Apache Kafka: the same alterations, valid and
not, get the same error codes and messages, and the same filters describe the same entities."""

from __future__ import annotations

import pytest

from protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from tests.differential.harness import Pair, Target, retry, unique

pytestmark = pytest.mark.differential

Entry = AlterClientQuotasRequest.EntryData
Op = tuple[str, float, bool]


def entry(entity: list[tuple[str, str | None]], ops: list[Op]) -> Entry:
    return Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                 ops=[Entry.OpData(key=k, value=v, remove=r) for k, v, r in ops])


def alter_each(target: Target, entries: list[Entry], validate_only: bool = False) -> list[tuple[int, str | None]]:
    """Each entry in a request of its own (Kafka checks a request's entries together)."""
    c = target.client()
    out = []
    for e in entries:
        answer: AlterClientQuotasResponse = c.call(49, 1, AlterClientQuotasRequest(entries=[e],
                                                                                   validate_only=validate_only))
        out.append((answer.entries[0].error_code, answer.entries[0].error_message))
    return out


def test_alterations_are_checked_alike(pair: Pair) -> None:
    user = unique("quota-user")
    entries = [
        entry([("user", user)], [("producer_byte_rate", 1000.0, False)]),
        entry([("user", user), ("client-id", None)], [("consumer_byte_rate", 10.0, False),
                                                      ("request_percentage", 50.5, False)]),
        entry([("user", user)], [("foo", 1.0, False)]),
        entry([("user", user)], [("connection_creation_rate", 1.0, False)]),
        entry([("ip", "10.1.2.3")], [("producer_byte_rate", 1.0, False)]),
        entry([("group", "g")], [("producer_byte_rate", 1.0, False)]),
        entry([("ip", "10.1.2.3"), ("user", user)], [("connection_creation_rate", 1.0, False)]),
        entry([("ip", "not-an-ip")], [("connection_creation_rate", 1.0, False)]),
        entry([], [("producer_byte_rate", 1.0, False)]),
        entry([("user", user)], [("producer_byte_rate", 1.5, False)]),
        entry([("user", user)], [("producer_byte_rate", 0.0, False)]),
        entry([("user", user)], [("request_percentage", -1.0, False)]),
        entry([("user", user)], [("producer_byte_rate", 1e30, False)]),
        entry([("user", user)], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
        entry([("user", "")], [("producer_byte_rate", 1.0, False)]),
        entry([("user", unique("nobody"))], [("producer_byte_rate", 0.0, True)]),
        entry([("user", user)], [("controller_mutation_rate", 1.5, False)]),
        entry([("user", user)], []),
    ]
    kafka = pair.compare(lambda t: alter_each(t, entries))
    assert any(code == 42 for code, _ in kafka)  # type: ignore[union-attr]


def test_validate_only_and_filters_describe_alike(pair: Pair) -> None:
    user = unique("quota-user")
    client = unique("quota-client")

    def scenario(target: Target) -> object:
        alter_each(target, [entry([("user", user), ("client-id", client)], [("producer_byte_rate", 2048.0, False)]),
                            entry([("user", user)], [("consumer_byte_rate", 4096.0, False)]),
                            entry([("client-id", client)], [("request_percentage", 25.0, False)])])
        validate = alter_each(target, [entry([("user", user), ("client-id", None)],
                                             [("producer_byte_rate", 1.0, False)])], validate_only=True)
        c = target.client()
        C = DescribeClientQuotasRequest.ComponentData
        # Kafka applies an alteration to its quota image a moment after answering it, in the
        # metadata log's order: once the last one is described, the others are in effect too.
        last = [C(entity_type="client-id", match_type=0, match=client)]

        def last_described() -> object:
            answer: DescribeClientQuotasResponse = c.call(48, 1, DescribeClientQuotasRequest(components=last,
                                                                                              strict=True))
            return [sorted((v.key, v.value) for v in x.values) for x in answer.entries or []]

        seen = retry(last_described, lambda got: got == [[("request_percentage", 25.0)]], timeout=30)
        assert seen == [[("request_percentage", 25.0)]], f"{target.name} did not apply the alterations in 30 s: {seen}"
        described = []
        for components, strict in (
                ([C(entity_type="user", match_type=0, match=user)], False),
                ([C(entity_type="user", match_type=0, match=user)], True),
                ([C(entity_type="user", match_type=0, match=user), C(entity_type="client-id", match_type=2, match=None)], False),
                ([C(entity_type="client-id", match_type=0, match=client)], False),
                ([C(entity_type="client-id", match_type=0, match=client)], True),
                ([C(entity_type="group", match_type=2, match=None)], False),
                ([C(entity_type="user", match_type=5)], False),
                ([C(entity_type="user", match_type=0, match=None)], False),
                ([C(entity_type="user", match_type=1, match="x")], False),
                ([C(entity_type="user", match_type=2, match="")], False),
                ([C(entity_type="user", match_type=2, match=None), C(entity_type="user", match_type=2, match=None)], False),
                ([C(entity_type="ip", match_type=2, match=None), C(entity_type="user", match_type=2, match=None)], False)):
            answer: DescribeClientQuotasResponse = c.call(48, 1, DescribeClientQuotasRequest(components=components,
                                                                                              strict=strict))
            described.append((answer.error_code, answer.error_message, None if answer.entries is None else sorted(
                (sorted((e.entity_type, e.entity_name or "<default>") for e in x.entity),
                 sorted((v.key, v.value) for v in x.values)) for x in answer.entries)))
        return validate, described

    pair.compare(scenario)
