"""How a node of a cluster reaches etcd: over TLS (``etcd.ssl.*``, the same stores and code as the
listeners' ``ssl.*``), as an etcd user (``etcd.username``/``etcd.password``), or over plain HTTP
where that cannot expose the cluster's secrets.

etcd holds what lets anyone act as a node of the cluster: the secret the nodes prove themselves
to each other with (``<prefix>/secrets/peers``, which authorizes WriteTxnMarkers: committing or
aborting anyone's transactions), the SCRAM credentials of every user, and etcd's own password.
Over plain HTTP to another host all of that crosses the network readable by anyone on the path,
so such an endpoint stops startup unless ``etcd.allow.plaintext=true`` says that the network is
trusted; plain HTTP on loopback (traffic that never leaves the host) is allowed, with a warning.

A node checks, before it reads or writes anything in etcd, that etcd accepts its certificate and
credentials and lets it read and write its prefix (``check_access``). A refusal stops it: exit
status 2, as for a configuration error, after one ERROR line ``cluster.etcd_refused`` saying why.
etcd not answering is waited for, as before: it may be starting."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import Any

import trio

from broker.cluster.etcd import EtcdAccessError, EtcdClient, EtcdError, parse_endpoints
from broker.observability import logs
from broker.security import tls
from broker.security.keystores import KeystoreError

EXIT_REFUSED = 2
RETRY_S = 0.5
SSL_PREFIX = "etcd.ssl."


def tls_configured(values: Mapping[str, Any]) -> bool:
    """Some ``etcd.ssl.*`` store is given (the endpoint identification setting alone is not)."""
    return any(values[f"{SSL_PREFIX}{name}"] for name in (
        "keystore.location", "keystore.certificate.chain", "keystore.key", "truststore.location",
        "truststore.certificates"))


def check_etcd(values: Mapping[str, Any]) -> None:
    """Raises ValueError naming the property when the etcd settings cannot work (made at startup,
    with the other configuration checks)."""
    text = str(values["etcd.endpoints"])
    if not text.strip():
        return
    endpoints = parse_endpoints(text)
    if not endpoints:
        raise ValueError(f"etcd.endpoints: {text!r} names no endpoint")
    plain = [e for e in endpoints if not e.tls]
    if plain and tls_configured(values):
        raise ValueError(f"etcd.ssl.* is set but etcd.endpoints has plain HTTP endpoints ({', '.join(map(str, plain))}): "
                         "name them https://")
    remote = [e for e in plain if not e.loopback]
    if remote and not values["etcd.allow.plaintext"]:
        raise ValueError(
            f"etcd.endpoints: {', '.join(map(str, remote))} is plain HTTP to another host: the cluster's secrets "
            "(the nodes' shared secret, SCRAM credentials, etcd.password) would cross the network unencrypted; "
            "use https:// (etcd.ssl.*), or set etcd.allow.plaintext=true if the network is trusted")
    chain, key = values[f"{SSL_PREFIX}keystore.certificate.chain"], values[f"{SSL_PREFIX}keystore.key"]
    if bool(chain) != bool(key):
        raise ValueError("etcd.ssl.keystore.certificate.chain and etcd.ssl.keystore.key go together")
    if bool(values["etcd.username"]) != bool(values["etcd.password"]):
        raise ValueError("etcd.username and etcd.password go together (etcd's gateway authenticates by password)")


def etcd_client(values: Mapping[str, Any]) -> EtcdClient:
    """The client of the configured etcd (the properties passed ``check_etcd``). Raises SystemExit
    when a store of ``etcd.ssl.*`` cannot be read, as the listeners' do."""
    context: ssl.SSLContext | None = None
    endpoints = parse_endpoints(str(values["etcd.endpoints"]))
    if any(e.tls for e in endpoints):
        try:
            context = tls.client_context(values, SSL_PREFIX)
        except (OSError, ssl.SSLError, KeystoreError) as exc:
            raise SystemExit(f"kcoord: cannot load the etcd.ssl keystore or truststore: {exc}") from None
    plain = [e for e in endpoints if not e.tls]
    if plain:
        logs.warn("cluster.etcd_plaintext", endpoints=",".join(map(str, plain)),
                  loopback=all(e.loopback for e in plain), credentials=bool(values["etcd.username"]),
                  note="the cluster's secrets go to etcd unencrypted" + (
                      "; allowed by etcd.allow.plaintext" if not all(e.loopback for e in plain) else
                      " on this host only"))
    return EtcdClient(str(values["etcd.endpoints"]), ssl_context=context, username=str(values["etcd.username"]),
                      password=str(values["etcd.password"]))


def _reason(client: EtcdClient, prefix: str, exc: EtcdAccessError) -> str:
    """What the operator has to change, before etcd's own words."""
    text = str(exc)
    keys = prefix.rstrip("/") + "/"
    if not client.username and ("permission denied" in text or "auth is on" in text or "user name is empty" in text):
        return f"etcd's auth is on and etcd.username is not set: {text}"
    if "permission denied" in text:
        return (f"etcd user {client.username!r} may not read and write {keys} (etcdctl role grant-permission "
                f"<role> readwrite --prefix=true {keys}): {text}")
    if "authentication failed" in text:
        return f"etcd refused user {client.username!r} with etcd.password (wrong user or password): {text}"
    if "CommonName of client" in text:
        return ("etcd's JSON gateway refuses client certificates that carry a Common Name (it could not map it to "
                f"an etcd user): issue this node's etcd certificate without a CN: {text}")
    return text


async def check_access(client: EtcdClient, prefix: str, retry_s: float = RETRY_S) -> None:
    """Returns once etcd accepts this node and lets it read and write ``prefix``; waits while etcd
    does not answer. A refusal logs one ``cluster.etcd_refused`` line and stops the node
    (SystemExit with status EXIT_REFUSED)."""
    while True:
        try:
            await client.verify_access(prefix)
        except EtcdAccessError as exc:
            logs.event("cluster.etcd_refused", logging.ERROR, endpoints=",".join(map(str, client.endpoints)),
                       user=client.username or None, prefix=prefix, reason=_reason(client, prefix, exc)[:800])
            raise SystemExit(EXIT_REFUSED) from None
        except EtcdError as exc:
            logs.warn("cluster.etcd_unavailable", error=str(exc)[:200])
            await trio.sleep(retry_s)
            continue
        logs.event("cluster.etcd_access", endpoints=",".join(map(str, client.endpoints)),
                   tls=all(e.tls for e in client.endpoints), user=client.username or None, prefix=prefix)
        return
