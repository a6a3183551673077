"""Delegation tokens (KIP-48) on one broker, over the wire: a user creates a token, a client
authenticates with it (SCRAM with ``tokenauth=true``, by scramp, an independent SCRAM client) and
acts as the token's owner; renewers, expiry, the checks Kafka makes (which listeners, which ACLs),
the tokens surviving ``kill -9``, and expired tokens swept. Kafka 4.4 answering the same requests is
in tests/differential/test_delegation_tokens.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.create_acls import CreateAclsRequest
from protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.security import USERS, SecureBroker, scram_wire_client

pytestmark = pytest.mark.timeout(120)
SECRET = "kcoord-test-token-secret"
SUFFIX = uuid.uuid4().hex[:6]
PREFIX = f"tok-{SUFFIX}-"
PASSWORDS = {**USERS, "carol": "carol-secret"}

SECURE_OVERRIDES = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "delegation.token.secret.key": SECRET,
    "delegation.token.expiry.check.interval.ms": "200",
    "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in PASSWORDS.items()),
}

# Kafka's codes for ACLs: resource TOPIC 2, USER 7; pattern PREFIXED 4, LITERAL 3; operation
# CREATE 5, CREATE_TOKENS 13; permission ALLOW 3.
ACLS = [(2, PREFIX, 4, "User:alice", 5), (7, "User:bob", 3, "User:alice", 13)]


def prepare_secure(broker: SecureBroker) -> None:
    admin = _plain(broker, "admin")
    Creation = CreateAclsRequest.AclCreation
    answer = admin.call(ApiKey.CreateAcls, 3, CreateAclsRequest(creations=[
        Creation(resource_type=r, resource_name=n, resource_pattern_type=p, principal=who, host="*", operation=op,
                 permission_type=3) for r, n, p, who, op in ACLS]))
    assert [r.error_code for r in answer.results] == [0, 0]


def _plain(secure: SecureBroker, user: str, listener: str = "SASL_PLAINTEXT") -> WireClient:
    c = WireClient("127.0.0.1", secure.ports[listener])
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{PASSWORDS[user]}".encode())).error_code == 0
    return c


def _create(c: WireClient, renewers: list[str] | None = None, max_lifetime_ms: int = -1,
            owner: str | None = None) -> Any:
    Renewer = CreateDelegationTokenRequest.CreatableRenewers
    kind, _, name = (owner or ":").partition(":")
    return c.call(ApiKey.CreateDelegationToken, 3, CreateDelegationTokenRequest(
        owner_principal_type=kind or None, owner_principal_name=name or None,
        renewers=[Renewer(principal_type=r.partition(":")[0], principal_name=r.partition(":")[2])
                  for r in renewers or []], max_lifetime_ms=max_lifetime_ms))


def _describe(c: WireClient, owners: list[str] | None = None) -> Any:
    Owner = DescribeDelegationTokenRequest.Owner
    return c.call(ApiKey.DescribeDelegationToken, 3, DescribeDelegationTokenRequest(
        owners=None if owners is None else [Owner(principal_type=o.partition(":")[0],
                                                  principal_name=o.partition(":")[2]) for o in owners]))


def _ids(c: WireClient, owners: list[str] | None = None) -> set[str]:
    answer = _describe(c, owners)
    assert answer.error_code == 0
    return {t.token_id for t in answer.tokens}


def _renew(c: WireClient, mac: bytes, period: int = -1) -> Any:
    return c.call(ApiKey.RenewDelegationToken, 2, RenewDelegationTokenRequest(hmac=mac, renew_period_ms=period))


def _expire(c: WireClient, mac: bytes, period: int = -1) -> Any:
    return c.call(ApiKey.ExpireDelegationToken, 2, ExpireDelegationTokenRequest(hmac=mac, expiry_time_period_ms=period))


def _token_client(secure: SecureBroker, token: Any, mechanism: str = "SCRAM-SHA-256") -> tuple[WireClient, int]:
    return scram_wire_client(secure.ports["SASL_PLAINTEXT"], token.token_id, base64.b64encode(token.hmac).decode(),
                             mechanism, token=True)


def _create_topic(c: WireClient, name: str) -> int:
    Topic = CreateTopicsRequest.CreatableTopic
    answer = c.call(ApiKey.CreateTopics, 7, CreateTopicsRequest(
        topics=[Topic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=15000, validate_only=False))
    return int(answer.topics[0].error_code)


def test_a_token_is_created_described_renewed_and_expired_by_its_owner_and_renewers(secure: SecureBroker) -> None:
    alice, bob, carol, admin = (_plain(secure, u) for u in ("alice", "bob", "carol", "admin"))
    created = _create(alice, ["User:bob"], max_lifetime_ms=3_600_000)
    assert created.error_code == 0
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    assert (created.token_requester_principal_type, created.token_requester_principal_name) == ("User", "alice")
    # The password is HMAC-SHA512 of the token id under the broker's secret.
    assert created.hmac == hmac.new(SECRET.encode(), created.token_id.encode(), hashlib.sha512).digest()
    assert created.max_timestamp_ms == created.issue_timestamp_ms + 3_600_000
    assert created.expiry_timestamp_ms == created.max_timestamp_ms  # the hour is shorter than the default day
    token_id = created.token_id

    # The owner and the renewer see it (owners null: every token they may see), carol does not, the
    # super user does; asking for owners [] gets nothing, as Kafka answers.
    assert token_id in _ids(alice) and token_id in _ids(bob) and token_id in _ids(admin)
    assert token_id not in _ids(carol)
    assert token_id in _ids(admin, ["User:alice"]) and token_id in _ids(admin, ["User:bob"])
    assert token_id not in _ids(admin, ["User:carol"])
    assert _ids(alice, []) == set()
    described = next(t for t in _describe(alice).tokens if t.token_id == token_id)
    assert described.hmac == created.hmac
    assert [(r.principal_type, r.principal_name) for r in described.renewers] == [("User", "bob")]

    # The renewer renews, carol may not, an unknown HMAC is not found.
    renewed = _renew(bob, created.hmac, 60_000)
    assert renewed.error_code == 0
    assert created.issue_timestamp_ms + 60_000 <= renewed.expiry_timestamp_ms <= created.max_timestamp_ms
    assert _renew(carol, created.hmac).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert _renew(alice, b"not a token").error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    after = next(t for t in _describe(alice).tokens if t.token_id == token_id)
    assert after.expiry_timestamp == renewed.expiry_timestamp_ms

    # Expiring with a negative period removes it; it no longer authenticates.
    assert _expire(carol, created.hmac).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert _token_client(secure, created)[1] == 0
    gone = _expire(alice, created.hmac)
    assert gone.error_code == 0
    assert token_id not in _ids(admin)
    assert _token_client(secure, created)[1] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert _renew(alice, created.hmac).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_client_with_a_token_acts_as_the_tokens_owner_and_cannot_manage_tokens(
        secure: SecureBroker, mechanism: str) -> None:
    alices = _create(_plain(secure, "alice"))
    bobs = _create(_plain(secure, "bob"))
    as_alice, code = _token_client(secure, alices, mechanism)
    assert code == 0
    as_bob, code = _token_client(secure, bobs, mechanism)
    assert code == 0
    # Only alice may create topics under the prefix: the token's client is alice.
    assert _create_topic(as_alice, f"{PREFIX}{mechanism.lower()}") == 0
    assert _create_topic(as_bob, f"{PREFIX}{mechanism.lower()}-bob") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # A connection authenticated with a token manages no tokens (a token cannot beget tokens).
    assert _create(as_alice).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert _renew(as_alice, alices.hmac).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert _expire(as_alice, alices.hmac).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert _describe(as_alice).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    # A wrong password (another token's HMAC) fails.
    wrong = scram_wire_client(secure.ports["SASL_PLAINTEXT"], alices.token_id, base64.b64encode(bobs.hmac).decode(),
                              mechanism, token=True)[1]
    assert wrong == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_token_requests_are_refused_where_kafka_refuses_them(secure: SecureBroker) -> None:
    plaintext = WireClient("127.0.0.1", secure.ports["PLAINTEXT"])
    assert _create(plaintext).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    refused = _renew(plaintext, b"x")
    assert (refused.error_code, refused.expiry_timestamp_ms) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    assert _describe(plaintext).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    alice = _plain(secure, "alice")
    assert _create(alice, ["Group:ops"]).error_code == ErrorCode.INVALID_PRINCIPAL_TYPE
    # Another owner needs CREATE_TOKENS on that user: alice has it on bob, not on carol.
    denied = _create(alice, owner="User:carol")
    assert denied.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert (denied.principal_name, denied.token_requester_principal_name) == ("carol", "alice")
    for_bob = _create(alice, owner="User:bob")
    assert for_bob.error_code == 0
    assert (for_bob.principal_name, for_bob.token_requester_principal_name) == ("bob", "alice")
    # The requester sees it, but only the owner and renewers may renew it.
    assert for_bob.token_id in _ids(alice)
    assert _renew(alice, for_bob.hmac).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert _renew(_plain(secure, "bob"), for_bob.hmac).error_code == 0
    as_bob, code = _token_client(secure, for_bob)
    assert code == 0 and _create_topic(as_bob, f"{PREFIX}not-bobs") == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_tokens_survive_kill_9_and_expired_ones_are_swept(secure: SecureBroker) -> None:
    alice = _plain(secure, "alice")
    kept = _create(alice, ["User:bob"])
    short = _create(alice, max_lifetime_ms=1500)
    assert kept.error_code == 0 and short.error_code == 0
    secure.process.kill()
    secure.process.start()
    secure.process.wait_loaded()
    alice = _plain(secure, "alice")
    assert kept.token_id in _ids(alice)
    as_alice, code = _token_client(secure, kept)
    assert code == 0 and _create_topic(as_alice, f"{PREFIX}after-restart") == 0
    # The short token passes its maximum lifetime and the sweep removes it.
    wait_for(lambda: short.token_id not in _ids(alice), 60, "the expired token is swept")

    def refusals() -> int:
        return sum(1 for line in secure.process.log().splitlines() if " sasl.authentication_failed " in line)

    before = refusals()
    # The expired token replayed: refused, logged once, and the token still alive goes on serving.
    assert _token_client(secure, short)[1] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert refusals() == before + 1
    assert _token_client(secure, kept)[1] == 0


def test_describing_others_tokens_takes_describe_tokens_on_the_owner_or_describe_on_the_token(
        secure: SecureBroker) -> None:
    alice, bob, carol = (_plain(secure, u) for u in ("alice", "bob", "carol"))
    alices, bobs = _create(alice), _create(bob)
    assert not {alices.token_id, bobs.token_id} & _ids(carol)
    Creation = CreateAclsRequest.AclCreation
    # USER User:alice DESCRIBE_TOKENS (14), and DELEGATION_TOKEN <bob's id> DESCRIBE (8), for carol.
    granted = _plain(secure, "admin").call(ApiKey.CreateAcls, 3, CreateAclsRequest(creations=[
        Creation(resource_type=7, resource_name="User:alice", resource_pattern_type=3, principal="User:carol",
                 host="*", operation=14, permission_type=3),
        Creation(resource_type=6, resource_name=bobs.token_id, resource_pattern_type=3, principal="User:carol",
                 host="*", operation=8, permission_type=3)]))
    assert [r.error_code for r in granted.results] == [0, 0]
    assert {alices.token_id, bobs.token_id} <= _ids(carol)
    # Carol may see them, not renew them.
    assert _renew(carol, alices.hmac).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH


def test_a_token_session_ends_with_the_token(secure: SecureBroker) -> None:
    """KIP-368 with a token: the session lifetime SaslAuthenticate gives is at most what is left of
    the token (``connections.max.reauth.ms`` is 0 here: only the token bounds it), and a request
    sent after it ran out closes the connection, as Kafka closes it."""
    created = _create(_plain(secure, "alice"), max_lifetime_ms=3_000)
    answers: list[Any] = []
    client, code = scram_wire_client(secure.ports["SASL_PLAINTEXT"], created.token_id,
                                     base64.b64encode(created.hmac).decode(), token=True, answers=answers)
    assert code == 0
    # What is left of the token: 3 s at most (0 on a machine slow enough to spend them before the
    # authentication, and then the session is over at once).
    lifetime = answers[0].session_lifetime_ms
    assert lifetime <= 3_000
    def closed() -> bool:  # served until the session runs out, then closed
        try:
            _describe(client)
        except (OSError, EOFError, ConnectionError):
            return True
        return False

    wait_for(closed, lifetime / 1000 + 60, "the broker to close the connection when the token ran out", step=0.2)
