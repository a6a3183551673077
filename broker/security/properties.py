"""Cross-property checks of the security settings, made at startup."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.security.etcd_access import check_etcd
from broker.security.listeners import ListenerSpec
from broker.security.tls import PrincipalMapper

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")


def enabled_mechanisms(values: Mapping[str, Any]) -> list[str]:
    return [m.strip().upper() for m in str(values["sasl.enabled.mechanisms"]).split(",") if m.strip()]


def bootstrap_users(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    users: list[tuple[str, str]] = []
    for entry in str(values["sasl.bootstrap.users"]).split(","):
        if not entry.strip():
            continue
        name, sep, password = entry.strip().partition(":")
        if not sep or not name or not password:
            raise ValueError(f"sasl.bootstrap.users: {entry.strip()!r} is not name:password")
        users.append((name, password))
    return users


def super_users(values: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(p.strip() for p in str(values["super.users"]).split(";") if p.strip())


def check_security(values: Mapping[str, Any], listeners: list[ListenerSpec]) -> None:
    """Raises ValueError naming the property when the settings cannot work together."""
    unknown = [m for m in enabled_mechanisms(values) if m not in MECHANISMS]
    if unknown:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported; supported are "
                         f"{', '.join(MECHANISMS)}")
    if any(spec.sasl for spec in listeners) and not enabled_mechanisms(values):
        raise ValueError("sasl.enabled.mechanisms: a SASL listener needs at least one mechanism")
    bootstrap_users(values)
    if any(spec.tls for spec in listeners):
        has_file = bool(values["ssl.keystore.location"])
        has_inline = bool(values["ssl.keystore.certificate.chain"]) and bool(values["ssl.keystore.key"])
        if not (has_file or has_inline):
            raise ValueError("an SSL or SASL_SSL listener needs ssl.keystore.location (or "
                             "ssl.keystore.certificate.chain and ssl.keystore.key)")
        if values["ssl.client.auth"] != "none" and not (values["ssl.truststore.location"]
                                                        or values["ssl.truststore.certificates"]):
            raise ValueError("ssl.client.auth needs ssl.truststore.location or ssl.truststore.certificates")
    PrincipalMapper(str(values["ssl.principal.mapping.rules"]))  # raises ValueError naming the property
    authorizer = str(values["authorizer.class.name"]).strip()
    if authorizer and authorizer not in AUTHORIZERS:
        raise ValueError(f"authorizer.class.name: {authorizer!r} is not one of {', '.join(AUTHORIZERS)} (or empty)")
    for principal in super_users(values):
        if ":" not in principal:
            raise ValueError(f"super.users: {principal!r} is not TYPE:NAME (User:admin)")
    check_etcd(values)
