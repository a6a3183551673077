"""Sessions and re-authentication (KIP-368) for every SASL mechanism of a listener, against Apache
Kafka 4.4 and kcoord configured with the same properties: ``connections.max.reauth.ms`` for the
listener, a mechanism's own lifetime through the listener prefix
(``listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms``), PLAIN, both SCRAMs,
OAUTHBEARER (unsecured tokens) and delegation tokens (SCRAM with ``tokenauth=true``).

Over the wire: the session lifetime SaslAuthenticate gives, a re-authentication on the same
connection (the same user; another user; another mechanism), and a connection that did not
re-authenticate closed at its first request past its session, on both brokers alike. Then the Java
client (Kafka's VerifiableProducer) producing across several session lifetimes with each mechanism:
it re-authenticates on its own and every record is acknowledged by both brokers (kcoord's log shows
the re-authentications). GSSAPI's sessions are in test_sasl_gssapi.py."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from testkit.jws import jws
from testkit.kafka import OAUTHBEARER_JAAS, SASL_USERS, TOKEN_SECRET, KafkaProcess
from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.differential.oauthbearer_exchange import client_message
from tests.differential.sessions import reauthentications, verifiable_producer
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.security import scram_exchange, scram_wire_client

pytestmark = [pytest.mark.differential, pytest.mark.timeout(400)]

REAUTH_MS = 3000
SCRAM_512_REAUTH_MS = 4000
SETTINGS = {
    "connections.max.reauth.ms": str(REAUTH_MS),
    "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": str(SCRAM_512_REAUTH_MS),
    "connection.failed.authentication.delay.ms": "0",
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "token")
# Long enough for a loaded machine: how long Kafka may take to learn of a token from its metadata.
PROPAGATION_S = 60.0


class Broker:
    """One of the two brokers: its PLAINTEXT bootstrap (administration), its SASL port, a
    delegation token of alice's, and (kcoord) its process, whose log tells re-authentications."""

    def __init__(self, name: str, bootstrap: str, sasl_port: int, process: BrokerProcess | None = None) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.sasl_port = sasl_port
        self.process = process
        self.token_id = ""
        self.token_password = ""


@pytest.fixture(scope="module")
def brokers(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Broker]]:
    work = tmp_path_factory.mktemp("reauth")
    kafka = KafkaProcess(kafka_libs, work / "kafka", dict(SETTINGS), sasl_users=SASL_USERS)
    assert kafka.sasl_port is not None
    (work / "kcoord").mkdir()
    ours = BrokerProcess(work / "kcoord" / "data", {})
    ours_sasl = free_port()
    ours.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{ours.port},SASL_PLAINTEXT://127.0.0.1:{ours_sasl}",
        "advertised.listeners": "",
        "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in SASL_USERS.items()),
        "delegation.token.secret.key": TOKEN_SECRET,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
        **SETTINGS,
    })
    try:
        kafka.start()
        ours.start()
        ours.wait_loaded()
        found = {"kafka": Broker("kafka", kafka.bootstrap, kafka.sasl_port),
                 "kcoord": Broker("kcoord", ours.bootstrap, ours_sasl, ours)}
        for broker in found.values():
            _make_token(broker)
        yield found
    finally:
        ours.kill()
        kafka.stop()


def _plain_login(c: WireClient, user: str = "alice") -> Any:
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    return c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{SASL_USERS[user]}".encode()))


def _make_token(broker: Broker) -> None:
    """Alice's token on ``broker``, once the broker authenticates with it (Kafka learns of it from
    its metadata log a moment after answering)."""
    with WireClient("127.0.0.1", broker.sasl_port, timeout=20.0) as alice:
        assert _plain_login(alice).error_code == 0
        created = alice.call(ApiKey.CreateDelegationToken, 3, CreateDelegationTokenRequest(
            owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime_ms=-1))
        assert created.error_code == 0, created
    broker.token_id, broker.token_password = created.token_id, base64.b64encode(created.hmac).decode()

    def authenticates() -> bool:
        c, code = scram_wire_client(broker.sasl_port, broker.token_id, broker.token_password, "SCRAM-SHA-256",
                                    token=True)
        c.close()
        return code == 0

    wait_for(authenticates, PROPAGATION_S, f"{broker.name} to authenticate alice's token", step=0.2)


def _oauth_token(sub: str = "alice", life_s: int = 600) -> bytes:
    now = int(time.time())
    return client_message(jws({"sub": sub, "iat": now - 5, "exp": now + life_s, "scope": "kafka"}))


def _login(broker: Broker, c: WireClient | None, mechanism: str, user: str = "alice",
           oauth_life_s: int = 600) -> tuple[WireClient, int, int]:
    """Authenticates (again, on ``c``) with ``mechanism``: the client, the error code and the
    session lifetime the broker gave (ms)."""
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512", "token"):
        answers: list[Any] = []
        token = mechanism == "token"
        name, password = (broker.token_id, broker.token_password) if token else (user, SASL_USERS[user])
        if c is None:
            client, code = scram_wire_client(broker.sasl_port, name, password,
                                             "SCRAM-SHA-256" if token else mechanism, token=token, answers=answers)
        else:
            client, code = c, scram_exchange(c, name, password, "SCRAM-SHA-256" if token else mechanism, token,
                                             answers)
        return client, code, answers[0].session_lifetime_ms if answers and code == 0 else 0
    client = c or WireClient("127.0.0.1", broker.sasl_port, timeout=20.0)
    if mechanism == "PLAIN":
        answer = _plain_login(client, user)
    else:
        shaken = client.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        if shaken.error_code:
            return client, shaken.error_code, 0
        answer = client.call(ApiKey.SaslAuthenticate, 2,
                             SaslAuthenticateRequest(auth_bytes=_oauth_token(user, oauth_life_s)))
    return client, answer.error_code, answer.session_lifetime_ms


    client.set_server_first(answer.auth_bytes.decode())
    answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
    answers.append(answer)
    return c, answer.error_code


def _served(c: WireClient) -> object:
    try:
        answer = c.call(ApiKey.Metadata, 12, MetadataRequest(topics=[]))
    except (ConnectionError, OSError, EOFError):
        return "closed"
    return "served" if answer.brokers else "no brokers"


def _attempt(call: Any) -> object:
    try:
        return call()
    except (ConnectionError, OSError, EOFError):
        return "closed"


def sessions(broker: Broker) -> dict[str, object]:
    out: dict[str, object] = {}
    # Each mechanism's lifetime, and a re-authentication as the same principal.
    held: list[tuple[str, WireClient, float]] = []
    for mechanism in MECHANISMS:
        c, code, lifetime = _login(broker, None, mechanism)
        again = _attempt(lambda: _login(broker, c, mechanism)[1:])  # noqa: B023
        out[mechanism] = {"code": code, "lifetime": lifetime, "again": again}
        held.append((mechanism, c, time.monotonic()))
    # An OAUTHBEARER token that ends before the listener's lifetime bounds the session: what is
    # left of it (its exp is in whole seconds, so 1-2 s).
    c, code, lifetime = _login(broker, None, "OAUTHBEARER", oauth_life_s=2)
    out["OAUTHBEARER token ending first"] = {"code": code, "what is left of the token": 0 < lifetime <= 2000}
    c.close()
    # Re-authenticating as someone else, or with another mechanism, is refused.
    c, _code, _ = _login(broker, None, "PLAIN")
    out["PLAIN then bob"] = _attempt(lambda: _login(broker, c, "PLAIN", user="bob")[1])
    out["PLAIN then bob, connection"] = _served(c)
    c.close()
    c, _code, _ = _login(broker, None, "PLAIN")
    out["PLAIN then SCRAM-SHA-256"] = _attempt(lambda: _login(broker, c, "SCRAM-SHA-256")[1])
    out["PLAIN then SCRAM-SHA-256, connection"] = _served(c)
    c.close()
    # Past the session each connection was last given (measured from the client's side, where it
    # began before its answer came back), the next request closes the connection.
    longest = max(REAUTH_MS, SCRAM_512_REAUTH_MS) / 1000
    # The condition is the broker's clock passing the session's end: no event announces it.
    time.sleep(max(0.0, held[-1][2] + longest + 0.5 - time.monotonic()))
    for mechanism, c, _ in held:
        out[f"{mechanism} past its session"] = _served(c)
        c.close()
    return out


def test_sessions_and_reauthentication_over_the_wire(brokers: dict[str, Broker]) -> None:
    theirs = sessions(brokers["kafka"])
    ours = sessions(brokers["kcoord"])
    assert ours == theirs
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER", "token"):
        assert theirs[mechanism] == {"code": 0, "lifetime": REAUTH_MS, "again": (0, REAUTH_MS)}, mechanism
    assert theirs["SCRAM-SHA-512"] == {"code": 0, "lifetime": SCRAM_512_REAUTH_MS, "again": (0, SCRAM_512_REAUTH_MS)}
    assert theirs["OAUTHBEARER token ending first"] == {"code": 0, "what is left of the token": True}
    # Another user: SASL_AUTHENTICATION_FAILED; another mechanism: its handshake is accepted and
    # its first token closes the connection unanswered.
    assert theirs["PLAIN then bob"] == 58 and theirs["PLAIN then SCRAM-SHA-256"] == "closed"
    assert all(theirs[f"{m} past its session"] == "closed" for m in MECHANISMS)


def _client_config(work: Path, broker: Broker, mechanism: str) -> Path:
    jaas = {
        "PLAIN": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
                 f'password="{SASL_USERS["alice"]}";',
        "OAUTHBEARER": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                       'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",kafka";',
        "token": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                 f'username="{broker.token_id}" password="{broker.token_password}" tokenauth="true";',
    }.get(mechanism, 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                     f'password="{SASL_USERS["alice"]}";')
    path = work / f"{broker.name}-{mechanism}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={'SCRAM-SHA-256' if mechanism == 'token' else mechanism}\n"
                    f"sasl.jaas.config={jaas}\n")
    return path


def produce_across_sessions(libs: Path, broker: Broker, mechanism: str, work: Path) -> dict[str, object]:
    """Kafka's VerifiableProducer, with ``mechanism``, sending 4 records a second for about four
    of its sessions: what it says of its records."""
    topic = f"reauth-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: a client dropped takes its requests
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    return verifiable_producer(libs, f"127.0.0.1:{broker.sasl_port}", topic, _client_config(work, broker, mechanism),
                               records=48, per_second=4)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_java_client_reauthenticates_and_keeps_producing(brokers: dict[str, Broker], kafka_libs: Path,
                                                             tmp_path: Path, mechanism: str) -> None:
    process = brokers["kcoord"].process
    assert process is not None
    logged = "SCRAM-SHA-256" if mechanism == "token" else mechanism
    before = reauthentications(process, logged)
    # The two producers run at once: each spends its ~12 s waiting on its rate.
    with ThreadPoolExecutor(2) as pool:
        theirs, ours = pool.map(lambda name: produce_across_sessions(kafka_libs, brokers[name], mechanism,
                                                                     tmp_path), ("kafka", "kcoord"))
    assert ours == theirs == {"exit": 0, "acked": 48, "errors": []}
    # About 12 s of producing over sessions of 3-4 s: the client re-authenticated on kcoord.
    assert reauthentications(process, logged) > before
