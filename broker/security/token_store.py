"""Where delegation tokens are kept: one JSON document in a single node's data dir, durable before a
change is acknowledged, or (in a cluster) etcd's ``security/tokens/`` keys, which every node reads
with the ACLs and users (broker/security/etcd_store.py). Both apply a change to this node's
``DelegationTokens`` once it is durable, and the sweep removes expired tokens through them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from broker.cluster.etcd import EtcdError
from broker.observability import logs
from broker.security.tokens import DelegationTokens, TokenInfo
from storage import durable_json

TOKENS_FILE = "kcoord-delegation-tokens.json"


class TokenStore(Protocol):
    tokens: DelegationTokens

    async def alter_tokens(self, keep: list[TokenInfo], forget: list[str]) -> None:
        """Makes the change durable, then applies it to ``tokens``; raises if it could not."""
        ...


def load_file(data_dir: Path) -> dict[str, TokenInfo]:
    doc = durable_json.read(data_dir / TOKENS_FILE) or {}
    return {t["token_id"]: TokenInfo.from_dict(t) for t in doc.get("tokens", [])}


class FileTokenStore:
    def __init__(self, data_dir: Path, tokens: DelegationTokens) -> None:
        self.path = data_dir / TOKENS_FILE
        self.tokens = tokens
        tokens.replace(load_file(data_dir))

    async def alter_tokens(self, keep: list[TokenInfo], forget: list[str]) -> None:
        after = dict(self.tokens.tokens)
        for token in keep:
            after[token.token_id] = token
        for token_id in forget:
            after.pop(token_id, None)
        doc = {"version": 1, "tokens": [t.as_dict() for t in after.values()]}
        await trio.to_thread.run_sync(durable_json.write_durably, self.path, doc)
        for token in keep:
            self.tokens.keep(token)
        for token_id in forget:
            self.tokens.forget(token_id)


async def sweep_expired(store: TokenStore, interval_ms: int, now_ms: Callable[[], int]) -> None:
    """Every ``delegation.token.expiry.check.interval.ms``, removes the tokens past their expiry or
    maximum lifetime, as Kafka's controller does."""
    while True:
        await trio.sleep(interval_ms / 1000)
        expired = store.tokens.expired_ids(now_ms())
        if not expired:
            continue
        try:
            await store.alter_tokens([], expired)
        except (EtcdError, OSError) as exc:  # the next sweep tries again
            logs.warn("delegation_tokens.sweep_failed", error=str(exc)[:200])
            continue
        logs.event("delegation_tokens.expired", tokens=",".join(expired))
