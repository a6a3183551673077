"""Delegation tokens decided as Kafka 4.4's controller decides them (DelegationTokenControlManager):
lifetimes, who may renew or expire, the HMAC, and the SCRAM credential a token authenticates with."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
import scramp

from broker.security.scram import ScramError, ScramServer
from broker.security.tokens import DelegationTokens, TokenInfo
from protocol.errors import ErrorCode

DAY = 86_400_000
WEEK = 7 * DAY
NOW = 1_800_000_000_000


def _tokens(secret: bytes | None = b"s3cret") -> DelegationTokens:
    return DelegationTokens(secret, WEEK, DAY)


def _created(tokens: DelegationTokens, max_lifetime: int = -1, renewers: tuple[str, ...] = ("User:bob",),
             owner: str = "User:alice") -> TokenInfo:
    created = tokens.create("User:alice", owner, list(renewers), max_lifetime, NOW)
    assert created.error == ErrorCode.NONE and created.token is not None
    tokens.keep(created.token)
    return created.token


def test_lifetimes_follow_the_broker_defaults_and_the_request() -> None:
    tokens = _tokens()
    default = _created(tokens)
    assert (default.issue_ms, default.expiry_ms, default.max_ms) == (NOW, NOW + DAY, NOW + WEEK)
    short = _created(tokens, max_lifetime=3_600_000)
    assert (short.expiry_ms, short.max_ms) == (NOW + 3_600_000, NOW + 3_600_000)
    longer = _created(tokens, max_lifetime=2 * WEEK)  # capped at delegation.token.max.lifetime.ms
    assert longer.max_ms == NOW + WEEK
    # Kafka's Uuid.toString: 22 url-safe base64 characters.
    assert len(default.token_id) == 22 and default.token_id != short.token_id


def test_the_hmac_is_hmac_sha512_of_the_id_under_the_secret() -> None:
    tokens = _tokens()
    token = _created(tokens)
    assert tokens.hmac(token.token_id) == hmac.new(b"s3cret", token.token_id.encode(), hashlib.sha512).digest()
    assert tokens.by_hmac(tokens.hmac(token.token_id)) == token
    assert tokens.by_hmac(b"\0" * 64) is None


def test_renewal_by_owner_or_renewer_within_the_maximum() -> None:
    tokens = _tokens()
    token = _created(tokens, max_lifetime=2 * DAY)
    mac = tokens.hmac(token.token_id)
    later = NOW + DAY // 2
    renewed = tokens.renew("User:bob", mac, -1, later)
    assert (renewed.error, renewed.expiry_ms) == (ErrorCode.NONE, later + DAY)
    assert tokens.renew("User:alice", mac, 1000, later).expiry_ms == later + 1000
    # Never past the token's maximum (the first renewal applied, as storage would).
    assert renewed.keep is not None
    tokens.keep(renewed.keep)
    assert tokens.renew("User:alice", mac, -1, later + DAY - 5).expiry_ms == NOW + 2 * DAY
    assert tokens.renew("User:carol", mac, -1, later).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert tokens.renew("User:alice", b"x", -1, later).error == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert tokens.renew("User:alice", mac, -1, NOW + 2 * DAY + 1).error == ErrorCode.DELEGATION_TOKEN_EXPIRED


def test_the_requester_may_describe_but_not_renew_a_token_it_created_for_another_owner() -> None:
    tokens = _tokens()
    token = tokens.create("User:admin", "User:alice", [], -1, NOW).token
    assert token is not None
    tokens.keep(token)
    assert token.owner_or_renewer("User:admin") and not token.may_renew("User:admin")
    mac = tokens.hmac(token.token_id)
    assert tokens.renew("User:admin", mac, -1, NOW).error == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH


def test_expiry_moves_the_expiry_or_removes_the_token() -> None:
    tokens = _tokens()
    token = _created(tokens)
    mac = tokens.hmac(token.token_id)
    moved = tokens.expire("User:alice", mac, 5000, NOW + 10)
    assert (moved.error, moved.expiry_ms, moved.forget) == (ErrorCode.NONE, NOW + 5010, None)
    assert moved.keep is not None and moved.keep.expiry_ms == NOW + 5010
    gone = tokens.expire("User:bob", mac, -1, NOW + 10)
    assert (gone.error, gone.expiry_ms, gone.forget) == (ErrorCode.NONE, NOW + 10, token.token_id)
    # An expired token can still be removed, but not moved.
    assert tokens.expire("User:alice", mac, 10, NOW + DAY + 1).error == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert tokens.expire("User:alice", mac, -1, NOW + DAY + 1).forget == token.token_id
    assert tokens.expired_ids(NOW + DAY + 1) == [token.token_id]
    assert tokens.expired_ids(NOW) == []


def test_without_a_secret_every_operation_is_disabled() -> None:
    tokens = _tokens(None)
    assert not tokens.enabled
    assert tokens.create("User:a", "User:a", [], -1, NOW).error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert tokens.renew("User:a", b"x", -1, NOW).error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert tokens.expire("User:a", b"x", -1, NOW).error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert tokens.scram_lookup("any", "SCRAM-SHA-256") is None


def test_tokens_round_trip_through_their_stored_form() -> None:
    token = TokenInfo("abc", "User:alice", "User:admin", ("User:bob", "User:carol"), 1, 3, 2)
    assert TokenInfo.from_json(token.to_json()) == token


def _scram_exchange(server: ScramServer, mechanism: str, user: str, password: str, token: bool) -> bytes:
    """scramp, an independent SCRAM client, with Kafka's ``tokenauth=true`` extension appended to
    its client-first message (the extension is part of the bare message the proof signs)."""
    client = scramp.ScramClient([mechanism], user, password)
    first = client.get_client_first()
    if token:
        first += ",tokenauth=true"
        client.client_first_bare += ",tokenauth=true"
    client.set_server_first(server.first(first.encode()).decode())
    final = server.final(client.get_client_final().encode())
    client.set_server_final(final.decode())
    return final


def test_a_client_authenticates_with_the_token_id_and_the_base64_hmac_as_the_owner() -> None:
    tokens = _tokens()
    token = _created(tokens)
    password = base64.b64encode(tokens.hmac(token.token_id)).decode()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        server = ScramServer(mechanism, lambda user, mech: None, tokens.scram_lookup)
        _scram_exchange(server, mechanism, token.token_id, password, token=True)
        assert (server.authorization_id, server.token_expiry_ms) == ("alice", token.expiry_ms)
    # Without the extension the token id is looked up as a user, and there is none; a forgotten
    # token authenticates no more.
    server = ScramServer("SCRAM-SHA-256", lambda user, mech: None, tokens.scram_lookup)
    with pytest.raises(ScramError, match="Invalid user credentials"):
        _scram_exchange(server, "SCRAM-SHA-256", token.token_id, password, token=False)
    tokens.forget(token.token_id)
    server = ScramServer("SCRAM-SHA-256", lambda user, mech: None, tokens.scram_lookup)
    with pytest.raises(ScramError, match="Invalid tokenId"):
        _scram_exchange(server, "SCRAM-SHA-256", token.token_id, password, token=True)
