"""Delegation tokens (KIP-48) against Apache Kafka 4.4 and kcoord, both with delegation tokens on
(the same ``delegation.token.secret.key``) and the same users on a SASL_PLAINTEXT listener.

First the four APIs over the wire, every answer compared: the lifecycle (create with a renewer,
describe as owner, renewer, stranger and with an empty owner list, renew, expire), every refusal
Kafka makes (PLAINTEXT, a token-authenticated connection, a renewer that is not a user, unknown
HMACs, strangers) and authentication with a token (SCRAM with ``tokenauth=true``) before and after
it is expired. Then Kafka's own ``kafka-delegation-tokens`` tool and a Java admin client that
authenticates with the token, against both.

Kafka's brokers learn of a token from the metadata log, a moment after CreateDelegationToken is
answered (and of its removal a moment after ExpireDelegationToken): authentication with a fresh
token is retried until it succeeds (until it fails, after expiry), and the scenario goes on once
the token is described (no longer described), on both brokers alike. kcoord answers a token's
change only once every later request sees it."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from testkit.kafka import SASL_USERS, TOKEN_SECRET, run_tool
from testkit.kcoord import BrokerProcess
from tests.differential.conftest import sasl_port
from tests.differential.harness import Normalizer, Pair, Plain, differences
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.security import scram_wire_client

pytestmark = [pytest.mark.differential, pytest.mark.timeout(300)]
# Long enough for a loaded machine: how long Kafka may take to learn of a token from its metadata.
PROPAGATION_S = 60.0
TOOL = "org.apache.kafka.tools.DelegationTokenCommand"


def _authed(port: int, user: str) -> WireClient:
    c = WireClient("127.0.0.1", port, timeout=20.0)
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{SASL_USERS[user]}".encode())).error_code == 0
    return c


def _until(attempt: Callable[[], tuple[Any, int]], done: Callable[[int], bool]) -> tuple[Any, int]:
    """Attempts until ``done`` holds of the attempt's code (or the deadline); the last attempt."""
    last: list[tuple[Any, int]] = []

    def attempted() -> bool:
        last[:] = [attempt()]
        return done(last[0][1])

    with contextlib.suppress(AssertionError):  # compared as it is: the other broker's answer tells
        wait_for(attempted, PROPAGATION_S, "the change to reach the broker", step=0.2)
    return last[0]


def _create(c: WireClient, renewers: list[tuple[str, str]], max_lifetime_ms: int = -1,
            owner: tuple[str, str] | None = None, version: int = 3) -> Any:
    Renewer = CreateDelegationTokenRequest.CreatableRenewers
    return c.call(ApiKey.CreateDelegationToken, version, CreateDelegationTokenRequest(
        owner_principal_type=owner[0] if owner else None, owner_principal_name=owner[1] if owner else None,
        renewers=[Renewer(principal_type=k, principal_name=n) for k, n in renewers], max_lifetime_ms=max_lifetime_ms))


def _describe(c: WireClient, owners: list[tuple[str, str]] | None, version: int = 3) -> Any:
    Owner = DescribeDelegationTokenRequest.Owner
    return c.call(ApiKey.DescribeDelegationToken, version, DescribeDelegationTokenRequest(
        owners=None if owners is None else [Owner(principal_type=k, principal_name=n) for k, n in owners]))


def _created(answer: Any) -> dict[str, object]:
    """A CreateDelegationToken answer, with what each broker makes up (the id, the time) reduced to
    what must hold of it."""
    return {"error_code": answer.error_code, "owner": (answer.principal_type, answer.principal_name),
            "requester": (answer.token_requester_principal_type, answer.token_requester_principal_name),
            "lifetime": answer.max_timestamp_ms - answer.issue_timestamp_ms,
            "expires_after": answer.expiry_timestamp_ms - answer.issue_timestamp_ms,
            "id_length": len(answer.token_id), "timestamps": answer.issue_timestamp_ms if answer.error_code else None,
            "hmac_is_hmac_sha512_of_the_id": answer.hmac == hmac.new(
                TOKEN_SECRET.encode(), answer.token_id.encode(), hashlib.sha512).digest() if answer.token_id else None}


def _tokens(answer: Any, token_id: str) -> dict[str, object]:
    """A DescribeDelegationToken answer as far as it concerns one token."""
    mine = [t for t in answer.tokens if t.token_id == token_id]
    return {"error_code": answer.error_code, "tokens": [{
        "owner": (t.principal_type, t.principal_name),
        "requester": (t.token_requester_principal_type, t.token_requester_principal_name),
        "renewers": [(r.principal_type, r.principal_name) for r in t.renewers],
        "lifetime": t.max_timestamp - t.issue_timestamp, "hmac_length": len(t.hmac)} for t in mine]}


def lifecycle(port: int, plaintext: int) -> dict[str, object]:
    alice, bob, carol = (_authed(port, u) for u in ("alice", "bob", "carol"))
    out: dict[str, object] = {}
    created = _create(alice, [("User", "bob")], max_lifetime_ms=3_600_000)
    out["create"] = _created(created)
    token_id, mac = created.token_id, created.hmac
    _until(lambda: (None, len(_tokens(_describe(alice, None), token_id)["tokens"])),  # type: ignore[arg-type]
           lambda seen: seen == 1)
    out["describe as owner"] = _tokens(_describe(alice, None), token_id)
    out["describe as renewer"] = _tokens(_describe(bob, None), token_id)
    out["describe as stranger"] = _tokens(_describe(carol, None), token_id)
    out["describe bob's as carol"] = _tokens(_describe(carol, [("User", "bob")]), token_id)
    out["describe no owners"] = (_describe(alice, []))
    out["describe v1"] = _tokens(_describe(alice, [("User", "alice")], version=1), token_id)

    renewed = alice.call(ApiKey.RenewDelegationToken, 2, RenewDelegationTokenRequest(hmac=mac, renew_period_ms=60_000))
    out["renew by owner"] = (renewed.error_code, renewed.expiry_timestamp_ms - created.issue_timestamp_ms >= 60_000)
    out["renew by renewer v1"] = bob.call(ApiKey.RenewDelegationToken, 1, RenewDelegationTokenRequest(
        hmac=mac, renew_period_ms=-1)).error_code
    out["renew by stranger"] = (carol.call(ApiKey.RenewDelegationToken, 2, RenewDelegationTokenRequest(
        hmac=mac, renew_period_ms=-1)))
    out["renew unknown"] = (alice.call(ApiKey.RenewDelegationToken, 2, RenewDelegationTokenRequest(
        hmac=b"no such token", renew_period_ms=-1)))
    out["expire by stranger"] = (carol.call(ApiKey.ExpireDelegationToken, 2, ExpireDelegationTokenRequest(
        hmac=mac, expiry_time_period_ms=-1)))
    out["expire unknown"] = (alice.call(ApiKey.ExpireDelegationToken, 2, ExpireDelegationTokenRequest(
        hmac=b"no such token", expiry_time_period_ms=10)))

    password = base64.b64encode(mac).decode()
    as_token, code = _until(lambda: scram_wire_client(port, token_id, password, "SCRAM-SHA-256", token=True),
                            lambda code: code == 0)
    out["authenticate with the token"] = code
    out["create with a token"] = _created(_create(as_token, []))
    out["describe with a token"] = (_describe(as_token, None))
    out["wrong password"] = scram_wire_client(port, token_id, "bm90IHRoZSBobWFj", "SCRAM-SHA-512", token=True)[1]

    out["renewer not a user"] = _created(_create(alice, [("Group", "ops")]))
    out["for another owner"] = _created(_create(alice, [], owner=("User", "bob")))
    out["create v1"] = _created(_create(bob, [], version=1))
    clear = WireClient("127.0.0.1", plaintext, timeout=20.0)
    out["create over PLAINTEXT"] = _created(_create(clear, []))
    out["renew over PLAINTEXT"] = (clear.call(ApiKey.RenewDelegationToken, 2, RenewDelegationTokenRequest(
        hmac=mac, renew_period_ms=-1)))
    out["describe over PLAINTEXT"] = (_describe(clear, None))

    expired = alice.call(ApiKey.ExpireDelegationToken, 2, ExpireDelegationTokenRequest(hmac=mac, expiry_time_period_ms=-1))
    out["expire now"] = expired.error_code
    _until(lambda: (None, len(_tokens(_describe(alice, None), token_id)["tokens"])),  # type: ignore[arg-type]
           lambda seen: seen == 0)
    out["describe after expiry"] = _tokens(_describe(alice, None), token_id)
    out["renew after expiry"] = (alice.call(ApiKey.RenewDelegationToken, 2, RenewDelegationTokenRequest(
        hmac=mac, renew_period_ms=-1)))
    out["authenticate after expiry"] = _until(
        lambda: scram_wire_client(port, token_id, password, "SCRAM-SHA-512", token=True), lambda code: code != 0)[1]
    return out


def test_the_token_apis_answer_as_kafka_answers(pair: Pair, kafka: Any, kcoord: BrokerProcess) -> None:
    theirs: Plain = Normalizer()(lifecycle(kafka.sasl_port, kafka.port))
    ours: Plain = Normalizer()(lifecycle(sasl_port(kcoord), kcoord.port))
    diff = differences(theirs, ours)
    assert not diff, "Kafka and kcoord differ:\n  " + "\n  ".join(diff)
    assert isinstance(theirs, dict)
    assert theirs["authenticate with the token"] == 0
    assert theirs["authenticate after expiry"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert theirs["create over PLAINTEXT"] == {**theirs["create over PLAINTEXT"],
                                               "error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED}


def _command_config(directory: Path, name: str, jaas: str, mechanism: str = "SCRAM-SHA-256") -> Path:
    path = directory / f"{name}.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\nsasl.jaas.config={jaas}\n")
    return path


def _scram_jaas(user: str, password: str, token: bool = False) -> str:
    extra = ' tokenauth="true"' if token else ""
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{password}"{extra};')


def java_tools(libs: Path, bootstrap: str, work: Path) -> dict[str, object]:
    """The token's life through ``kafka-delegation-tokens`` as alice, and a Java admin client that
    authenticates with it (``kafka-topics --list``)."""
    work.mkdir(parents=True, exist_ok=True)
    alice = _command_config(work, "alice", _scram_jaas("alice", SASL_USERS["alice"]))

    def tool(config: Path, *args: str, main: str = TOOL) -> subprocess.CompletedProcess[str]:
        return run_tool(libs, main, "--bootstrap-server", bootstrap, "--command-config", str(config), *args,
                        timeout=120)

    out: dict[str, object] = {}
    created = tool(alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    found = re.search(r"Created delegation token with tokenId : (\S+)", created.stdout)
    assert created.returncode == 0 and found, created.stdout + created.stderr
    token_id = found.group(1)
    row = next(line.split() for line in created.stdout.splitlines() if line.startswith(token_id))
    mac = row[1]
    out["created"] = {"owner": row[2], "requester": row[3], "renewers": row[4]}
    described = tool(alice, "--describe", "--owner-principal", "User:alice")
    out["described"] = described.returncode == 0 and token_id in described.stdout
    mine = tool(alice, "--describe")  # no owner given: the tool asks for an empty list
    out["described with no owner"] = re.findall(r"Total number of tokens : (\d+)", mine.stdout)
    renewed = tool(alice, "--renew", "--hmac", mac, "--renew-time-period", "60000")
    out["renewed"] = (renewed.returncode, "Completed renew operation" in renewed.stdout)

    token = _command_config(work, "token", _scram_jaas(token_id, mac, token=True))
    listed: list[subprocess.CompletedProcess[str]] = []

    def lists() -> bool:
        listed[:] = [tool(token, "--list", main="org.apache.kafka.tools.TopicCommand")]
        return listed[0].returncode == 0

    with contextlib.suppress(AssertionError):  # compared as it is
        wait_for(lists, PROPAGATION_S, "the Java client to authenticate with the token", step=0.5)
    out["java client with the token"] = listed[0].returncode
    refused = tool(token, "--describe", "--owner-principal", "User:alice")
    out["token manages tokens"] = (refused.returncode,
                                   "UnsupportedByAuthenticationException"
                                   in refused.stdout + refused.stderr)
    expired = tool(alice, "--expire", "--hmac", mac, "--expiry-time-period", "-1")
    out["expired"] = (expired.returncode, "Completed expire operation" in expired.stdout)
    return out


def test_kafkas_delegation_token_tool_and_a_java_client_with_a_token(
        pair: Pair, kafka: Any, kcoord: BrokerProcess, tmp_path: Path) -> None:
    theirs = java_tools(kafka.libs, kafka.sasl_bootstrap, tmp_path / "kafka")
    ours = java_tools(kafka.libs, f"127.0.0.1:{sasl_port(kcoord)}", tmp_path / "kcoord")
    assert ours == theirs
    assert theirs["created"] == {"owner": "User:alice", "requester": "User:alice", "renewers": "[User:bob]"}
    assert theirs["java client with the token"] == 0 and theirs["token manages tokens"] == (1, True)
