"""The console over TLS with client certificates required (an https console.listener with the
broker's ssl.* properties): a real HTTPS client (Python's ssl) without a certificate is refused at
the handshake; a certificate's subject becomes the user as the broker's SSL listeners map it
(ssl.principal.mapping.rules), with the ACL checks of the wire: bob's certificate (no ACL on the
group) is refused the reset, alice's (Read on the group) resets it and a real consumer of the group
resumes there; a certificate no rule maps is not authenticated."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import ThreadedConsumer, wait_for
from tests.integration.helpers.console import committed_offsets, first_offsets, guarded_group
from tests.integration.helpers.security import Pki, make_pki

pytestmark = pytest.mark.timeout(240)

GROUP, TOPIC, PARTITIONS, RECORDS = "mtls-g", "mtls-t", 2, 10  # records per partition
# alice and bob: the certificate's CN; carol's certificate matches no rule.
RULES = "RULE:^CN=(alice|bob),OU=Payments,O=Shop$/$1/"


def _context(pki: Pki, user: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if user is not None:
        cert, key = pki.clients[user]
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def request(broker: BrokerProcess, pki: Pki, user: str | None, path: str, fields: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Status and body of a console page (GET) or action (POST of ``fields``) over HTTPS, with
    ``user``'s client certificate (none: None)."""
    data = None if fields is None else urllib.parse.urlencode(fields).encode()
    req = urllib.request.Request(f"https://localhost:{broker.console_port}{path}", data=data,
                                 method="GET" if data is None else "POST", headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=60, context=_context(pki, user)) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_client_certificates_are_the_consoles_users_with_the_wires_acl_checks(broker_factory: Any,
                                                                              tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", clients=("alice", "bob", "carol"))
    broker: BrokerProcess = broker_factory({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",  # only the group is guarded
        "console.actions.enable": "true",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": RULES,
    }, start=False)
    broker.overrides["console.listener"] = f"https://127.0.0.1:{broker.console_port}"
    broker.start_loaded()
    guarded_group(broker, GROUP, TOPIC, PARTITIONS, RECORDS)
    at_end = {(TOPIC, p): RECORDS for p in range(PARTITIONS)}

    # The console serves pages to a certificate the CA signed (once it listens).
    wait_for(lambda: request(broker, pki, "bob", f"/groups/{GROUP}")[0] == 200, 60, "the console's group page")
    # Without a certificate the handshake is refused: no page, no action.
    for path, fields in ((f"/groups/{GROUP}", None), ("/actions/reset-offsets", {"group": GROUP, "to": "earliest"})):
        with pytest.raises(OSError):  # ssl.SSLError or the connection reset, as the client sees it
            request(broker, pki, None, path, fields)

    shift = {"group": GROUP, "to": "shift", "value": "-4"}
    status, body = request(broker, pki, "bob", "/actions/reset-offsets", shift)
    assert status == 403 and "User:bob may not" in body and "GROUP_AUTHORIZATION_FAILED" in body, body
    # The certificate is the user: basic credentials beside it change nothing.
    basic = {"Authorization": "Basic " + base64.b64encode(b"alice:alice-secret").decode()}
    status, body = request(broker, pki, "bob", "/actions/reset-offsets", shift, basic)
    assert status == 403 and "User:bob may not" in body, body
    # A subject no rule maps is not authenticated, as on the broker's SSL listeners.
    status, body = request(broker, pki, "carol", "/actions/reset-offsets", shift)
    assert status == 401 and "matches no ssl.principal.mapping.rules rule" in body, body
    assert committed_offsets(broker, GROUP) == at_end

    status, body = request(broker, pki, "alice", "/actions/reset-offsets", shift)
    assert status == 200 and "as User:alice" in body, body
    assert committed_offsets(broker, GROUP) == {(TOPIC, p): RECORDS - 4 for p in range(PARTITIONS)}
    # A real consumer of the group resumes at the new offsets ("latest" would skip them if it did not).
    member = ThreadedConsumer(broker.bootstrap, GROUP, [TOPIC], **{"auto.offset.reset": "latest"})
    try:
        wait_for(lambda: len(first_offsets(member)) == PARTITIONS and len(member.messages) >= 8, 60,
                 "the consumer to read what the reset put back", seen=lambda: first_offsets(member))
        assert first_offsets(member) == {p: RECORDS - 4 for p in range(PARTITIONS)}
    finally:
        member.close()
