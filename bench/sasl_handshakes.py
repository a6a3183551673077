"""SASL authentications per second, per mechanism, against kcoord and Apache Kafka 4.4, one run.

    python -m bench.sasl_handshakes [--seconds 5] [--rounds 3] [--clients 4]

Each broker listens on SASL_PLAINTEXT with the same users, OAUTHBEARER (Kafka's unsecured
validator) and delegation tokens. For each mechanism, ``--clients`` threads of a separate process
each connect, authenticate (SaslHandshake v1 and SaslAuthenticate, scramp as the SCRAM client) and
close, again and again for ``--seconds``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (4096 iterations),
OAUTHBEARER (an unsecured token), a delegation token (SCRAM-SHA-512 with ``tokenauth``), when the
OIDC provider is fetched (testkit/oidc.py) OAUTHBEARER with an RS256 token signed by it (``OIDC``,
on a second SASL listener validating signed tokens against its JWKS; the token is fetched once)
and, when an MIT KDC and python-gssapi are installed, GSSAPI (a temporary realm; the client's
ticket is fetched once, each authentication sends an AP-REQ and completes RFC 4752's
security-layer step).

Prints, per mechanism and broker, the medians over rounds of authentications per second and of
the broker's CPU per authentication (from /proc), and kcoord/Kafka ratios. The load generator
shares the machine: SCRAM's client side costs as much as the server's, so the rate measures both;
the broker's CPU per authentication is the figure that is the broker's alone. Kafka is skipped
when its jars are not fetched (scripts/kafka.sh)."""

from __future__ import annotations

import argparse
import base64
import multiprocessing
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import cpu_seconds, work_dir
from broker.security.gssapi_sasl import available as gssapi_available
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from testkit import kdc as kdc_module
from testkit.jws import unsecured_jwt
from testkit.kafka import OAUTHBEARER_JAAS, SASL_USERS, TOKEN_SECRET, KafkaProcess, kafka_libs
from testkit.kcoord import BrokerProcess
from testkit.oidc import OidcProvider, provider_libs
from testkit.ports import free_port

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "OIDC", "token", "GSSAPI")
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
KRB_PRINCIPALS = ("kafka/localhost", "alice")


def authenticate(port: int, mechanism: str, token: tuple[str, str] | None) -> bool:
    """One connection, one authentication, closed; whether it succeeded."""
    import scramp

    wire = {"token": "SCRAM-SHA-512", "OIDC": "OAUTHBEARER"}.get(mechanism, mechanism)
    with WireClient("127.0.0.1", port, timeout=30) as c:
        if c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism=wire)).error_code:
            return False
        if wire == "GSSAPI":
            return _gssapi(c)
        if wire == "PLAIN":
            return c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
                auth_bytes=b"\0alice\0" + SASL_USERS["alice"].encode())).error_code == 0
        if wire == "OAUTHBEARER":
            bearer = token[1] if mechanism == "OIDC" and token else unsecured_jwt("alice")
            first = f"n,,\x01auth=Bearer {bearer}\x01\x01".encode()
            answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=first))
            return answer.error_code == 0 and not answer.auth_bytes
        user, password = token if mechanism == "token" and token else ("alice", SASL_USERS["alice"])
        client = scramp.ScramClient([wire], user, password)
        first_text = client.get_client_first()
        if mechanism == "token":
            first_text += ",tokenauth=true"
            client.client_first_bare += ",tokenauth=true"
        answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=first_text.encode()))
        if answer.error_code:
            return False
        client.set_server_first(answer.auth_bytes.decode())
        answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
            auth_bytes=client.get_client_final().encode()))
        return answer.error_code == 0


def _gssapi(c: WireClient) -> bool:
    """RFC 4752's client side, with python-gssapi: the context's tokens, then the broker's wrapped
    offer answered with "no security layer"."""
    import gssapi

    context = gssapi.SecurityContext(name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service),
                                     usage="initiate")
    token = context.step()
    while True:
        answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=token or b""))
        if answer.error_code:
            return False
        if not context.complete:
            token = context.step(answer.auth_bytes)
            continue
        if not answer.auth_bytes:  # the last context token's answer: the offer comes next
            token = b""
            continue
        offer = context.unwrap(answer.auth_bytes).message
        reply = context.wrap(bytes([1]) + bytes(offer[1:4]), False).message
        final = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=reply))
        return final.error_code == 0


def _generate(port: int, mechanism: str, token: tuple[str, str] | None, seconds: float, clients: int,
              out: Any, env: dict[str, str]) -> None:
    os.environ.update(env)  # the realm, for GSSAPI
    counts = [0] * clients
    failures = [0] * clients
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        while time.monotonic() < stop:
            if authenticate(port, mechanism, token):
                counts[i] += 1
            else:
                failures[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((sum(counts), sum(failures)))


def measure(port: int, pid: int, mechanism: str, token: tuple[str, str] | None, seconds: float,
            clients: int, env: dict[str, str]) -> tuple[float, float]:
    """(authentications per second, broker CPU ms per authentication)."""
    queue: Any = multiprocessing.Queue()
    cpu0 = cpu_seconds(pid)
    started = time.monotonic()
    proc = multiprocessing.Process(target=_generate, args=(port, mechanism, token, seconds, clients, queue, env))
    proc.start()
    done, failed = queue.get()
    proc.join()
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(pid) - cpu0
    if failed:
        print(f"    ({failed} failed authentications)")
    return done / elapsed, (1000 * cpu / done if done else float("nan"))


def create_token(port: int) -> tuple[str, str]:
    with WireClient("127.0.0.1", port, timeout=30) as c:
        c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0" + SASL_USERS["alice"].encode()))
        created = c.call(ApiKey.CreateDelegationToken, 3, CreateDelegationTokenRequest(
            owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime_ms=-1))
    assert created.error_code == 0, created
    token = (created.token_id, base64.b64encode(created.hmac).decode())
    deadline = time.monotonic() + 60  # Kafka learns of a token from its metadata log a moment later
    while not authenticate(port, "token", token):
        assert time.monotonic() < deadline, "the delegation token never authenticated"
        time.sleep(0.2)
    return token


def _kerberos_settings(keytab: Path) -> dict[str, str]:
    return {"sasl.kerberos.service.name": "kafka",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{keytab}" principal="kafka/localhost@{kdc_module.REALM}";'}


def _oidc_settings(provider: OidcProvider) -> dict[str, str]:
    """A second SASL listener, OIDC, whose OAUTHBEARER validates the provider's signed tokens."""
    return {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                              "CONTROLLER:PLAINTEXT,OIDC:SASL_PLAINTEXT",
            "listener.name.oidc.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
            "listener.name.oidc.oauthbearer.sasl.jaas.config":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            "sasl.oauthbearer.jwks.endpoint.url": provider.jwks_url(),
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": provider.issuer()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    with work_dir("kcoord-bench-sasl-") as tmp:
        brokers: dict[str, tuple[int, int]] = {}
        realm: kdc_module.Kdc | None = None
        client_env: dict[str, str] = {}
        keytabs: dict[str, Path] = {}
        if kdc_module.available() and gssapi_available():
            realm = kdc_module.Kdc(tmp / "kdc").start()
            keytabs = {name: realm.add_principal(name) for name in KRB_PRINCIPALS}
            client_env = {**realm.env, "KRB5_CLIENT_KTNAME": str(keytabs["alice"]),
                          "KRB5CCNAME": f"FILE:{tmp / 'kdc' / 'cc-alice'}"}
        provider: OidcProvider | None = None
        oidc_libs = provider_libs()
        if oidc_libs is not None:
            provider = OidcProvider(oidc_libs, tmp / "oidc" / "provider.log").start()
        mechanisms = [m for m in MECHANISMS if (m != "GSSAPI" or realm is not None) and (m != "OIDC" or provider)]
        oidc_ports: dict[str, int] = {}
        (tmp / "kcoord").mkdir()
        kcoord = BrokerProcess(tmp / "kcoord" / "data", {"metrics.listener": "", "log.level": "WARNING",
                                                         "connection.failed.authentication.delay.ms": "0"})
        sasl = free_port()
        kcoord.overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{kcoord.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "advertised.listeners": "",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
            "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in SASL_USERS.items()),
            "delegation.token.secret.key": TOKEN_SECRET,
        })
        if realm is not None:
            kcoord.env.update(realm.env)
            kcoord.overrides.update(_kerberos_settings(keytabs["kafka/localhost"]))
            kcoord.overrides["sasl.enabled.mechanisms"] += ",GSSAPI"
        if provider is not None:
            oidc_ports["kcoord"] = free_port()
            kcoord.overrides["listeners"] += f",OIDC://127.0.0.1:{oidc_ports['kcoord']}"
            kcoord.overrides.update(_oidc_settings(provider))
        kcoord.start_loaded(wait=120, load=600)
        assert kcoord.proc is not None
        brokers["kcoord"] = (sasl, kcoord.proc.pid)
        kafka: KafkaProcess | None = None
        libs = kafka_libs()
        if libs is not None:
            kafka = KafkaProcess(libs, Path(tmp / "kafka"), {"connection.failed.authentication.delay.ms": "0"},
                                 sasl_users=SASL_USERS)
            if realm is not None:
                kafka.properties.update(_kerberos_settings(keytabs["kafka/localhost"]))
                kafka.properties["sasl.enabled.mechanisms"] += ",GSSAPI"
                kafka.jvm.append(f"-Djava.security.krb5.conf={realm.krb5_conf}")
            if provider is not None:
                oidc_ports["kafka"] = free_port()
                kafka.properties["listeners"] += f",OIDC://127.0.0.1:{oidc_ports['kafka']}"
                kafka.properties["advertised.listeners"] += f",OIDC://127.0.0.1:{oidc_ports['kafka']}"
                kafka.properties.update(_oidc_settings(provider))
                kafka.jvm.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={provider.jwks_url()}")
            kafka.start()
            assert kafka.proc is not None and kafka.sasl_port is not None
            brokers["kafka"] = (kafka.sasl_port, kafka.proc.pid)
        else:
            print("Apache Kafka is not fetched (bash scripts/kafka.sh): kcoord alone")
        try:
            tokens = {name: create_token(port) for name, (port, _pid) in brokers.items()}
            signed = ("jwt", provider.token("alice", "kafka")) if provider is not None else None
            results: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for r in range(args.rounds):
                for mechanism in mechanisms:
                    for name, (port, pid) in brokers.items():
                        if mechanism == "OIDC":
                            port, token = oidc_ports[name], signed
                        else:
                            token = tokens[name]
                        rate, cpu = measure(port, pid, mechanism, token, args.seconds, args.clients, client_env)
                        results.setdefault((mechanism, name), []).append((rate, cpu))
                        print(f"round {r + 1} {mechanism:14} {name:7} {rate:8.0f} auth/s  "
                              f"{cpu:6.2f} ms broker CPU per auth")
            print(f"\nmedians of {args.rounds} rounds, {args.clients} clients, {args.seconds:.0f} s each")
            print(f"{'mechanism':14} {'broker':7} {'auth/s':>8} {'CPU ms/auth':>12}")
            for mechanism in mechanisms:
                medians = {}
                for name in brokers:
                    rows = results[(mechanism, name)]
                    medians[name] = (statistics.median(r for r, _ in rows), statistics.median(c for _, c in rows))
                    print(f"{mechanism:14} {name:7} {medians[name][0]:8.0f} {medians[name][1]:12.2f}")
                if "kafka" in medians:
                    print(f"{mechanism:14} {'ratio':7} {medians['kcoord'][0] / medians['kafka'][0]:8.2f} "
                          f"{medians['kcoord'][1] / medians['kafka'][1]:12.2f}   (kcoord / Kafka)")
        finally:
            kcoord.kill()
            if kafka is not None:
                kafka.stop()
            if realm is not None:
                realm.stop()
            if provider is not None:
                provider.stop()


if __name__ == "__main__":
    main()
