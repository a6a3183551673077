"""Cross-property checks of the security settings, made at startup."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.security.etcd_access import check_etcd
from broker.security.gssapi_sasl import GssapiSettings
from broker.security.gssapi_sasl import available as gssapi_available
from broker.security.jaas import parse_jaas
from broker.security.kerberos import KerberosShortNamer, default_realm
from broker.security.listeners import ListenerSpec
from broker.security.oauthbearer import UnsecuredValidator
from broker.security.oidc import VALIDATOR_HANDLER, JwkSet, OidcSettings, OidcValidator
from broker.security.tls import PrincipalMapper

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
LISTENER_PREFIX = "listener.name."
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
_MODULES = {"PLAIN": PLAIN_MODULE, "SCRAM-SHA-256": SCRAM_MODULE, "SCRAM-SHA-512": SCRAM_MODULE,
            "OAUTHBEARER": OAUTHBEARER_MODULE, "GSSAPI": KRB5_MODULE}


@dataclass(frozen=True)
class ListenerSasl:
    """What a SASL listener offers: its mechanisms (``listener.name.<l>.sasl.enabled.mechanisms`` or
    ``sasl.enabled.mechanisms``), PLAIN's users when its JAAS config names any (``user_<name>``;
    otherwise PLAIN checks passwords against the SCRAM credentials), and OAUTHBEARER's validator:
    Kafka's unsecured one with its JAAS options, or signed tokens checked against an identity
    provider's keys (``jwks``, kept fresh by ``broker.security.jwks``)."""

    mechanisms: list[str]
    plain_users: dict[str, str] | None = None
    oauth: UnsecuredValidator | OidcValidator = field(default_factory=UnsecuredValidator)
    jwks: JwkSet | None = None
    # ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``: a mechanism's own session
    # lifetime on this listener, over ``connections.max.reauth.ms``.
    reauth_ms: dict[str, int] = field(default_factory=dict)
    # GSSAPI: the broker's keytab and service principal, and the short-name rules.
    gssapi: GssapiSettings | None = None


def listener_properties(values: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """``listener.name.<listener>.<rest>`` -> {(LISTENER, rest): value}."""
    out: dict[tuple[str, str], str] = {}
    for name, value in values.items():
        if name.startswith(LISTENER_PREFIX):
            listener, _, rest = name[len(LISTENER_PREFIX):].partition(".")
            out[(listener.upper(), rest)] = str(value)
    return out


def listener_sasl(values: Mapping[str, Any], listener: str) -> ListenerSasl:
    """Raises ValueError naming the property when a listener's settings cannot be read."""
    prefixed = listener_properties(values)
    text = prefixed.get((listener, "sasl.enabled.mechanisms"))
    mechanisms = (enabled_mechanisms({"sasl.enabled.mechanisms": text}) if text is not None
                  else enabled_mechanisms(values))
    unknown = [m for m in mechanisms if m not in MECHANISMS]
    if unknown:
        raise ValueError(f"{LISTENER_PREFIX}{listener.lower()}.sasl.enabled.mechanisms: {', '.join(unknown)} not "
                         f"supported; supported are {', '.join(MECHANISMS)}")
    plain_users: dict[str, str] | None = None
    oauth: UnsecuredValidator | OidcValidator = UnsecuredValidator()
    jwks: JwkSet | None = None
    kerberos: GssapiSettings | None = None
    reauth_ms: dict[str, int] = {}
    for mechanism in MECHANISMS:
        text = prefixed.get((listener, f"{mechanism.lower()}.connections.max.reauth.ms"))
        if text is not None:
            if not text.strip().isdigit():
                raise ValueError(f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms: "
                                 f"{text!r} is not a number of milliseconds")
            reauth_ms[mechanism] = int(text)
    for mechanism, module in _MODULES.items():
        prop = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        text = prefixed.get((listener, f"{mechanism.lower()}.sasl.jaas.config"))
        if text is None:
            continue
        try:
            entries = parse_jaas(text)
            if len(entries) != 1 or entries[0].login_module != module:
                raise ValueError(f"expected one {module} entry")
            options = entries[0].options
            if mechanism == "PLAIN":
                users = {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
                plain_users = users or None
            elif mechanism == "OAUTHBEARER" and not _secured_oauth(prefixed, listener):
                oauth = UnsecuredValidator.from_options(options)
            elif mechanism == "GSSAPI" and "GSSAPI" in mechanisms:
                kerberos = _kerberos(values, options)
        except ValueError as exc:
            raise ValueError(f"{prop}: {exc}") from None
    if "GSSAPI" in mechanisms and kerberos is None:
        raise ValueError(f"{LISTENER_PREFIX}{listener.lower()}.gssapi.sasl.jaas.config: GSSAPI needs the broker's "
                         f"keytab and principal ({KRB5_MODULE} required useKeyTab=true keyTab=\"...\" "
                         f"principal=\"...\";)")
    if "OAUTHBEARER" in mechanisms and _secured_oauth(prefixed, listener):
        jwks = JwkSet(oidc_settings(values, prefixed, listener))
        oauth = OidcValidator(jwks)
    return ListenerSasl(mechanisms, plain_users, oauth, jwks, reauth_ms, kerberos)


def _secured_oauth(prefixed: Mapping[tuple[str, str], str], listener: str) -> bool:
    """Whether the listener's OAUTHBEARER validates signed tokens (Kafka's
    ``OAuthBearerValidatorCallbackHandler``) rather than unsecured ones (no handler named)."""
    key = "oauthbearer.sasl.server.callback.handler.class"
    handler = prefixed.get((listener, key), "").strip()
    if handler and handler != VALIDATOR_HANDLER:
        raise ValueError(f"{LISTENER_PREFIX}{listener.lower()}.{key}: {handler} is not supported; kcoord validates "
                         f"signed tokens as {VALIDATOR_HANDLER} does, or unsecured ones without a handler")
    return bool(handler)


def oidc_settings(values: Mapping[str, Any], prefixed: Mapping[tuple[str, str], str], listener: str) -> OidcSettings:
    """A listener's ``sasl.oauthbearer.*`` settings: ``listener.name.<l>.oauthbearer.<name>``, else
    ``listener.name.<l>.<name>``, else ``<name>``, as Kafka looks them up. Raises ValueError naming
    the property for what Kafka's broker refuses to start with."""

    def get(name: str) -> tuple[str, str]:
        for key in (f"oauthbearer.{name}", name):
            if (listener, key) in prefixed:
                return f"{LISTENER_PREFIX}{listener.lower()}.{key}", prefixed[(listener, key)].strip()
        return name, str(values.get(name, "")).strip()

    def number(name: str, default: int) -> int:
        prop, text = get(name)
        if not text:
            return default
        if not text.isdigit():
            raise ValueError(f"{prop}: {text!r} is not a non-negative number")
        return int(text)

    def flag(name: str) -> bool:
        prop, text = get(name)
        if text.lower() not in ("", "true", "false"):
            raise ValueError(f"{prop}: {text!r} is not true or false")
        return text.lower() == "true"

    prop, url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ValueError(f"{prop}: OAUTHBEARER with {VALIDATOR_HANDLER} needs the identity provider's JWKS URL")
    if url.split(":", 1)[0].lower() not in ("http", "https", "file"):
        raise ValueError(f"{prop}: {url} is not an http, https or file URL")
    refresh = number("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000)
    if refresh <= 0:
        raise ValueError("sasl.oauthbearer.jwks.endpoint.refresh.ms must be positive")
    audience_prop, audience_text = get("sasl.oauthbearer.expected.audience")
    audience = [a.strip() for a in audience_text.split(",") if a.strip()]
    if len(set(audience)) != len(audience):
        raise ValueError(f"{audience_prop}: an audience is named twice")
    _, issuer = get("sasl.oauthbearer.expected.issuer")
    allow_audience = flag("sasl.oauthbearer.allow.unverified.audience")
    allow_issuer = flag("sasl.oauthbearer.allow.unverified.issuer")
    if not audience and not allow_audience:
        raise ValueError(f"{audience_prop}: required (or sasl.oauthbearer.allow.unverified.audience=true), as Kafka "
                         "4.4 requires it")
    if not issuer and not allow_issuer:
        raise ValueError("sasl.oauthbearer.expected.issuer: required (or sasl.oauthbearer.allow.unverified.issuer="
                         "true), as Kafka 4.4 requires it")
    return OidcSettings(
        url, refresh, number("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100),
        number("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000), tuple(audience), issuer or None,
        allow_audience, allow_issuer, get("sasl.oauthbearer.scope.claim.name")[1] or "scope",
        get("sasl.oauthbearer.sub.claim.name")[1] or "sub", number("sasl.oauthbearer.clock.skew.seconds", 30))


def _kerberos(values: Mapping[str, Any], options: Mapping[str, str]) -> GssapiSettings:
    keytab, principal = options.get("keyTab", ""), options.get("principal", "")
    if options.get("useKeyTab", "").lower() != "true" or not keytab or not principal:
        raise ValueError("expected useKeyTab=true, keyTab and principal")
    service = options.get("serviceName") or str(values.get("sasl.kerberos.service.name", ""))
    if not service:
        raise ValueError("No serviceName defined in either JAAS or Kafka config (sasl.kerberos.service.name)")
    if principal.split("/")[0].split("@")[0] != service:
        raise ValueError(f"the principal {principal} is not of the service {service} (sasl.kerberos.service.name)")
    if not gssapi_available():
        raise ValueError("GSSAPI needs python-gssapi (pip install 'kcoord[kerberos]'; Debian: libkrb5-dev)")
    rules = str(values.get("sasl.kerberos.principal.to.local.rules", "DEFAULT"))
    try:
        namer = KerberosShortNamer(rules, default_realm())
    except ValueError as exc:
        raise ValueError(f"sasl.kerberos.principal.to.local.rules: {exc}") from None
    return GssapiSettings(keytab, principal, namer)
OIDC_PROPERTIES = frozenset(f"sasl.oauthbearer.{name}" for name in (
    "jwks.endpoint.url", "jwks.endpoint.refresh.ms", "jwks.endpoint.retry.backoff.ms",
    "jwks.endpoint.retry.backoff.max.ms", "expected.audience", "expected.issuer", "allow.unverified.audience",
    "allow.unverified.issuer", "scope.claim.name", "sub.claim.name", "clock.skew.seconds"))
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
    names = {spec.name for spec in listeners}
    for listener, rest in listener_properties(values):
        mechanism, _, setting = rest.partition(".")
        per_mechanism = mechanism.upper() in MECHANISMS and setting in ("sasl.jaas.config", "connections.max.reauth.ms")
        # OAUTHBEARER's validator (its callback handler, and the sasl.oauthbearer.* settings, with
        # or without the mechanism's prefix), as Kafka reads them per listener.
        oauth = rest == "oauthbearer.sasl.server.callback.handler.class" or \
            rest.removeprefix("oauthbearer.") in OIDC_PROPERTIES
        if listener not in names or not (per_mechanism or oauth or rest == "sasl.enabled.mechanisms"):
            raise ValueError(f"unknown property {LISTENER_PREFIX}{listener.lower()}.{rest}: a listener-prefixed "
                             f"property names a listener of listeners and sasl.enabled.mechanisms, "
                             f"<mechanism>.sasl.jaas.config, <mechanism>.connections.max.reauth.ms, "
                             f"oauthbearer.sasl.server.callback.handler.class or [oauthbearer.]sasl.oauthbearer.*")
    for spec in listeners:
        if spec.sasl and not listener_sasl(values, spec.name).mechanisms:
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
