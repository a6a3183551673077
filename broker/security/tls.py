"""TLS for SSL and SASL_SSL listeners: the server context from Kafka's ``ssl.*`` properties, and the
principal a client certificate stands for.

Key and certificates are PEM only, from files (``ssl.keystore.location``: chain and key in one file;
``ssl.truststore.location``) or inline (``ssl.keystore.certificate.chain``/``ssl.keystore.key``,
``ssl.truststore.certificates``), as Kafka's PEM support (KIP-651) names them."""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

ANONYMOUS = "User:ANONYMOUS"
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# RFC 2253 short names, as Java's X500Principal writes them (what Kafka's default principal builder uses).
_SHORT_NAMES = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}


def server_context(values: Mapping[str, Any]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    password = values["ssl.key.password"] or None
    if values["ssl.keystore.location"]:
        ctx.load_cert_chain(values["ssl.keystore.location"], password=password)
    else:
        _load_inline_chain(ctx, values["ssl.keystore.certificate.chain"], values["ssl.keystore.key"], password)
    if values["ssl.truststore.location"]:
        ctx.load_verify_locations(cafile=values["ssl.truststore.location"])
    elif values["ssl.truststore.certificates"]:
        ctx.load_verify_locations(cadata=values["ssl.truststore.certificates"])
    ctx.verify_mode = _VERIFY[values["ssl.client.auth"]]
    return ctx


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """``ssl`` loads a chain only from a file: the inline PEM goes to a private temporary file
    that is removed as soon as it is read."""
    fd, path = tempfile.mkstemp(prefix="kcoord-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(chain.strip() + "\n" + key.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def principal_from_certificate(cert: Mapping[str, Any] | None) -> str:
    """``User:`` and the subject in RFC 2253 form (most specific name first: ``CN=app,O=Org``),
    as Kafka's default principal builder makes it; anonymous without a certificate."""
    subject = (cert or {}).get("subject")
    if not subject:
        return ANONYMOUS
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(str(value))}" for name, value in rdn))
    return "User:" + ",".join(rdns)
