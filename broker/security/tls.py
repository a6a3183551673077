"""TLS for SSL and SASL_SSL listeners: the server context from Kafka's ``ssl.*`` properties, and the
principal a client certificate stands for; and the client context of the connections to etcd, from
the same properties under ``etcd.ssl.*``, read by the same code.

The keystore and truststore are files of type JKS (Kafka's default; a PKCS12 file is read as well,
as Java reads it), PKCS12 or PEM (``ssl.keystore.location``, ``ssl.truststore.location``, with
``ssl.keystore.password``, ``ssl.key.password``, ``ssl.truststore.password``), or inline PEM
(``ssl.keystore.certificate.chain``/``ssl.keystore.key``, ``ssl.truststore.certificates``), as
Kafka's PEM support (KIP-651) names them. A certificate's subject becomes a principal through
``ssl.principal.mapping.rules`` (KIP-371), as Kafka's default principal builder does."""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.security.keystores import read_keystore, read_truststore

ANONYMOUS = "User:ANONYMOUS"
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# RFC 2253 short names, as Java's X500Principal writes them (what Kafka's default principal builder uses).
_SHORT_NAMES = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}


def server_context(values: Mapping[str, Any]) -> ssl.SSLContext:
    """Raises OSError, ssl.SSLError or KeystoreError when a store cannot be read."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(ctx, values, "ssl.")
    _load_truststore(ctx, values, "ssl.")
    ctx.verify_mode = _VERIFY[values["ssl.client.auth"]]
    return ctx


def client_context(values: Mapping[str, Any], prefix: str) -> ssl.SSLContext:
    """The context of a TLS client configured as a listener is, under ``prefix`` (``etcd.ssl.``):
    the server's certificate must chain to the truststore's CA certificates (the system's when none
    is given) and, with ``<prefix>endpoint.identification.algorithm`` ``https`` (Kafka's default),
    name the host connected to; the keystore, when given, is this client's certificate.
    Raises OSError, ssl.SSLError or KeystoreError when a store cannot be read."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_truststore(ctx, values, prefix):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if values[f"{prefix}keystore.location"] or values[f"{prefix}keystore.certificate.chain"]:
        _load_keystore(ctx, values, prefix)
    ctx.check_hostname = str(values[f"{prefix}endpoint.identification.algorithm"]).lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    # The JSON gateway of etcd is read as HTTP/1.1 (its port also offers h2 to whoever asks).
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _load_keystore(ctx: ssl.SSLContext, values: Mapping[str, Any], prefix: str) -> None:
    """The certificate chain and private key of ``<prefix>keystore.*`` (a file of any store type,
    or inline PEM) into ``ctx``."""
    key_password = values[f"{prefix}key.password"] or None
    location = values[f"{prefix}keystore.location"]
    if location:
        entry = read_keystore(Path(location).read_bytes(), values[f"{prefix}keystore.type"],
                              values[f"{prefix}keystore.password"], values[f"{prefix}key.password"])
        if entry is None:
            ctx.load_cert_chain(location, password=key_password)
        else:
            _load_inline_chain(ctx, entry.chain_pem, entry.key_pem, None)
    else:
        _load_inline_chain(ctx, values[f"{prefix}keystore.certificate.chain"], values[f"{prefix}keystore.key"],
                           key_password)


def _load_truststore(ctx: ssl.SSLContext, values: Mapping[str, Any], prefix: str) -> bool:
    """The CA certificates of ``<prefix>truststore.*`` into ``ctx``; False when none is configured."""
    if values[f"{prefix}truststore.location"]:
        trusted = read_truststore(Path(values[f"{prefix}truststore.location"]).read_bytes(),
                                  values[f"{prefix}truststore.type"], values[f"{prefix}truststore.password"])
        ctx.load_verify_locations(cadata=trusted)
        return True
    if values[f"{prefix}truststore.certificates"]:
        ctx.load_verify_locations(cadata=values[f"{prefix}truststore.certificates"])
        return True
    return False


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


def certificate_subject(cert: Mapping[str, Any] | None) -> str | None:
    """The subject in RFC 2253 form (most specific name first: ``CN=app,O=Org``), as Java's
    X500Principal writes it; None without a certificate."""
    subject = (cert or {}).get("subject")
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(str(value))}" for name, value in rdn))
    return ",".join(rdns)


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` rule applies to a certificate's subject: the client is
    not authenticated (as in Kafka, the connection is closed)."""


# Kafka's grammar for the rules (SslPrincipalMapper): DEFAULT, or RULE:pattern/replacement/ with
# an optional L or U; "\" escapes a "/" or "\" inside the pattern or the replacement.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: list[str | int]  # literal text and group numbers, as Java's replaceAll reads "$n"
    case: str = ""  # "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self._expand, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else (match.group(part) or "") for part in self.replacement)


def _replacement(text: str, groups: int, rule: str) -> list[str | int]:
    """Java's replacement syntax: "\\x" is x, "$n" group n (its digits read while the number
    stays a group, as Java does). A reference past the last group is literal text, as Kafka makes it."""
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 == len(text):
                raise ValueError(f"ssl.principal.mapping.rules: {rule!r}: replacement ends with an escape")
            literal.append(text[i + 1])
            i += 2
            continue
        if ch == "$":
            if i + 1 < len(text) and text[i + 1].isdigit() and int(text[i + 1]) <= groups:
                number, i = int(text[i + 1]), i + 2
                while i < len(text) and text[i].isdigit() and number * 10 + int(text[i]) <= groups:
                    number, i = number * 10 + int(text[i]), i + 1
                parts += ["".join(literal), number]
                literal = []
                continue
            if i + 1 < len(text) and text[i + 1].isdigit():
                literal.append("$")  # past the last group: literal, as Kafka escapes it
                i += 1
                continue
            raise ValueError(f"ssl.principal.mapping.rules: {rule!r}: illegal group reference in the replacement")
        literal.append(ch)
        i += 1
    parts.append("".join(literal))
    return [p for p in parts if p != ""]


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: the first rule that applies to a subject gives the name."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        for found in _RULE_SPLITTER.finditer(rules.strip()):
            text = found.group(1)
            parsed = _RULE_PARSER.match(text)
            if parsed is None or parsed.end() != len(text):
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule {text!r}")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None, []))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as exc:
                    raise ValueError(f"ssl.principal.mapping.rules: {text!r}: {exc}") from None
                self.rules.append(_Rule(pattern, _replacement(parsed.group(4), pattern.groups, text),
                                        parsed.group(6)))
        if not self.rules:
            raise ValueError("ssl.principal.mapping.rules: no rules (DEFAULT keeps the subject as it is)")

    def name_for(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn!r}")


DEFAULT_MAPPER = PrincipalMapper()


def principal_from_certificate(cert: Mapping[str, Any] | None, mapper: PrincipalMapper = DEFAULT_MAPPER) -> str:
    """``User:`` and the name the mapping rules give the subject (the subject itself by default),
    as Kafka's default principal builder makes it; anonymous without a certificate. Raises
    NoMatchingRule when no rule applies."""
    subject = certificate_subject(cert)
    if subject is None:
        return ANONYMOUS
    return "User:" + mapper.name_for(subject)
