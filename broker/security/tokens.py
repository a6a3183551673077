"""Delegation tokens (KIP-48) as Kafka's controller keeps them: who owns a token, who asked for it,
who may renew it, when it was issued, when it expires and how far it may be renewed.

A token's password is its HMAC: HMAC-SHA512 of the token id under ``delegation.token.secret.key``,
never stored (every node with the same key derives it). A client authenticates with SCRAM, the
token id as user name, the HMAC in base64 as password and the extension ``tokenauth=true``; the
SCRAM credentials are derived from that password on first use, as Kafka's brokers derive them.

This module decides; it reads no clock and writes nothing: each operation takes ``now`` and returns
the answer and the change (a token to keep, or the id of one to forget), which the caller makes
durable (broker/security/token_store.py) before answering. The rules are those of Kafka 4.4's
``DelegationTokenControlManager`` and ``KafkaApis`` (which checks ask what)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field

from broker.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential
from protocol.errors import ErrorCode

LONG_MAX = (1 << 63) - 1


def split_principal(principal: str) -> tuple[str, str]:
    """``User:alice`` -> (``User``, ``alice``), as Kafka's ``SecurityUtils.parseKafkaPrincipal``."""
    kind, _, name = principal.partition(":")
    return kind, name


def _sum(now: int, duration: int) -> int:
    return LONG_MAX if now > LONG_MAX - duration else now + duration


def token_id_for(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: url-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    owner: str  # "User:alice"
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``TokenInformation.ownerOrRenewer``: the requester counts too."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: str) -> bool:
        """Kafka's ``allowedToRenew``: the owner or a renewer (not the requester)."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now: int) -> bool:
        return self.max_ms < now or self.expiry_ms < now

    def as_dict(self) -> dict[str, object]:
        return {"token_id": self.token_id, "owner": self.owner, "requester": self.requester,
                "renewers": list(self.renewers), "issue_ms": self.issue_ms, "max_ms": self.max_ms,
                "expiry_ms": self.expiry_ms}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> TokenInfo:
        renewers = d["renewers"]
        assert isinstance(renewers, list)
        return cls(str(d["token_id"]), str(d["owner"]), str(d["requester"]), tuple(str(r) for r in renewers),
                   int(str(d["issue_ms"])), int(str(d["max_ms"])), int(str(d["expiry_ms"])))

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TokenInfo:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True)
class Created:
    error: int
    token: TokenInfo | None = None


@dataclass(frozen=True)
class Changed:
    """The answer to a renewal or an expiry: its error, the new expiry (-1 with an error, as Kafka's
    broker answers; 0 where Kafka's controller leaves it unset), and what to make durable."""

    error: int
    expiry_ms: int = 0
    keep: TokenInfo | None = None
    forget: str | None = None


@dataclass
class DelegationTokens:
    """The tokens this node knows, and the secret their HMACs are made with (None: tokens are
    disabled, DELEGATION_TOKEN_AUTH_DISABLED)."""

    secret: bytes | None
    max_lifetime_ms: int
    expiry_time_ms: int
    tokens: dict[str, TokenInfo] = field(default_factory=dict)
    # Derived from a token's HMAC on first use, per mechanism; dropped with the token.
    _credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    _by_hmac: dict[bytes, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    def hmac(self, token_id: str) -> bytes:
        assert self.secret is not None
        return hmac.digest(self.secret, token_id.encode(), hashlib.sha512)

    # ---- what storage holds ------------------------------------------------------------------

    def replace(self, tokens: dict[str, TokenInfo]) -> None:
        """Every token as storage holds it now (loaded at start, or read again in a cluster)."""
        for token_id in set(self.tokens) - set(tokens):
            self._drop_derived(token_id)
        self.tokens = dict(tokens)

    def keep(self, token: TokenInfo) -> None:
        self.tokens[token.token_id] = token

    def forget(self, token_id: str) -> None:
        self.tokens.pop(token_id, None)
        self._drop_derived(token_id)

    def _drop_derived(self, token_id: str) -> None:
        for mechanism in MECHANISMS:
            self._credentials.pop((token_id, mechanism), None)
        self._by_hmac = {k: v for k, v in self._by_hmac.items() if v != token_id}

    def by_hmac(self, mac: bytes) -> TokenInfo | None:
        if not self.enabled:
            return None
        token_id = self._by_hmac.get(mac)
        if token_id is None or token_id not in self.tokens:
            token_id = next((t for t in self.tokens if hmac.compare_digest(self.hmac(t), mac)), None)
            if token_id is None:
                return None
            self._by_hmac[mac] = token_id
        return self.tokens[token_id]

    # ---- authentication ----------------------------------------------------------------------

    def credential(self, token_id: str, mechanism: str) -> tuple[ScramCredential, TokenInfo] | None:
        """The SCRAM credential a client proves it holds the token with, and the token; None for
        an unknown token (Kafka: "Token Authentication failed: Invalid tokenId")."""
        token = self.tokens.get(token_id)
        if token is None or not self.enabled or mechanism not in MECHANISMS:
            return None
        credential = self._credentials.get((token_id, mechanism))
        if credential is None:
            password = base64.b64encode(self.hmac(token_id)).decode()
            credential = ScramCredential.from_password(mechanism, password, MIN_ITERATIONS)
            self._credentials[(token_id, mechanism)] = credential
        return credential, token

    def scram_lookup(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str, int] | None:
        """For the SCRAM exchange: the credential, the owner's name (the session's principal is
        ``User:<name>``, as Kafka's principal builder makes it) and the token's expiry."""
        found = self.credential(token_id, mechanism)
        if found is None:
            return None
        credential, token = found
        return credential, split_principal(token.owner)[1], token.expiry_ms

    # ---- the operations ----------------------------------------------------------------------

    def create(self, requester: str, owner: str, renewers: list[str], max_lifetime_ms: int, now: int,
               token_id: str | None = None) -> Created:
        if not self.enabled:
            return Created(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_ms = _sum(now, lifetime)
        expiry_ms = min(max_ms, _sum(now, self.expiry_time_ms))
        token = TokenInfo(token_id or token_id_for(uuid.uuid4().bytes), owner, requester, tuple(renewers), now,
                          max_ms, expiry_ms)
        return Created(ErrorCode.NONE, token)

    def renew(self, principal: str, mac: bytes, renew_period_ms: int, now: int) -> Changed:
        if not self.enabled:
            return Changed(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        token = self.by_hmac(mac)
        if token is None:
            return Changed(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
        if token.expired(now):
            return Changed(ErrorCode.DELEGATION_TOKEN_EXPIRED)
        if not token.may_renew(principal):
            return Changed(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
        period = self.expiry_time_ms
        if renew_period_ms > 0:
            period = min(period, renew_period_ms)
        expiry = min(token.max_ms, now + period)
        return Changed(ErrorCode.NONE, expiry, keep=_with_expiry(token, expiry))

    def expire(self, principal: str, mac: bytes, expiry_period_ms: int, now: int) -> Changed:
        if not self.enabled:
            return Changed(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        token = self.by_hmac(mac)
        if token is None:
            return Changed(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
        if not token.may_renew(principal):
            return Changed(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
        if expiry_period_ms < 0:
            return Changed(ErrorCode.NONE, now, forget=token.token_id)
        if token.expired(now):
            return Changed(ErrorCode.DELEGATION_TOKEN_EXPIRED)
        expiry = min(token.max_ms, _sum(now, expiry_period_ms))
        return Changed(ErrorCode.NONE, expiry, keep=_with_expiry(token, expiry))

    def expired_ids(self, now: int) -> list[str]:
        """The tokens past their expiry or maximum lifetime, which the sweep removes."""
        return sorted(t.token_id for t in self.tokens.values() if t.expired(now))


def _with_expiry(token: TokenInfo, expiry_ms: int) -> TokenInfo:
    return TokenInfo(token.token_id, token.owner, token.requester, token.renewers, token.issue_ms, token.max_ms,
                     expiry_ms)
