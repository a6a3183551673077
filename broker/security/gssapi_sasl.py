"""SASL/GSSAPI (Kerberos V5, RFC 4752) as Kafka's brokers serve it, on MIT Kerberos through
python-gssapi: the client's GSS-API tokens establish a security context with the broker's service
principal (its key from the keytab of the listener's JAAS config); then the broker offers "no
security layer" in a wrapped message, the client picks it (and may name an authorization id) in
its wrapped answer, and the client's principal, through ``sasl.kerberos.principal.to.local.rules``,
becomes ``User:<short name>``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.security.kerberos import KerberosShortNamer, NoMatchingRule
from broker.security.sasl_failure import AuthenticationFailed

NO_SECURITY_LAYER = 1
MAX_BUFFER = 0xFFFFFF


@dataclass(frozen=True)
class GssapiSettings:
    """The listener's Krb5LoginModule options (``keyTab``, ``principal``), the service name
    (``sasl.kerberos.service.name``) and the short-name rules."""

    keytab: str
    principal: str
    namer: KerberosShortNamer


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:  # checked at startup when GSSAPI is enabled (broker/security/properties.py)
        raise AuthenticationFailed("GSSAPI is not available on this broker") from None
    return gssapi


def available() -> bool:
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return False
    return True


class KerberosLoginFailed(Exception):
    """The broker's principal cannot log in with its keytab: Kafka's broker does not start then."""


def login(settings: GssapiSettings) -> None:
    """What Kafka's broker does at startup with its Krb5LoginModule (an initiator by default): logs
    in to the KDC with the keytab's key. Here the broker also asks for a ticket to its own service
    and accepts it with the keytab, so a keytab whose key the KDC no longer has (the service was
    re-keyed), a principal the keytab lacks or an unreachable KDC stop the start, with the reason,
    rather than failing every client later. Blocking (it talks to the KDC): run it on a thread."""
    gssapi = _gssapi()
    try:
        name = gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
        # A memory cache of this process's own: the login never touches the host's ticket cache.
        initiate = gssapi.Credentials(name=name, usage="initiate", store={
            "client_keytab": settings.keytab, "ccache": f"MEMORY:kcoord-login-{id(settings)}"})
        client = gssapi.SecurityContext(name=name, creds=initiate, usage="initiate")
        accept = gssapi.Credentials(name=name, usage="accept", store={"keytab": settings.keytab})
        server = gssapi.SecurityContext(creds=accept, usage="accept")
        token = client.step()
        while not (client.complete and server.complete):
            answer = server.step(token)
            if client.complete:
                break
            token = client.step(answer)
    except gssapi.exceptions.GSSError as exc:
        raise KerberosLoginFailed(f"{settings.principal} with the keytab {settings.keytab}: "
                                  f"{exc.gen_message()}") from None


class GssapiExchange:
    def __init__(self, settings: GssapiSettings) -> None:
        self.settings = settings
        self.stage = 0
        self.context: Any = None
        self.user: str | None = None
        self.credential_expiry_ms: int | None = None
        self.delegation_token = False

    def step(self, token: bytes) -> bytes:
        gssapi = _gssapi()
        try:
            if self.stage == 0:
                if self.context is None:
                    name = gssapi.Name(self.settings.principal, gssapi.NameType.kerberos_principal)
                    creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": self.settings.keytab})
                    self.context = gssapi.SecurityContext(creds=creds, usage="accept")
                out = self.context.step(token)
                if self.context.complete:
                    self.stage = 1
                return out or b""
            if self.stage == 1:
                # The client's (empty) answer to the last context token: offer no security layer.
                self.stage = 2
                offer = bytes([NO_SECURITY_LAYER]) + MAX_BUFFER.to_bytes(3, "big")
                return bytes(self.context.wrap(offer, False).message)
            if self.stage == 2:
                answer = bytes(self.context.unwrap(token).message)
                if len(answer) < 4 or not answer[0] & NO_SECURITY_LAYER:
                    raise AuthenticationFailed("Authentication failed: the client chose a security layer this broker "
                                       "does not offer")
                # An authorization id the client names (answer[4:]) changes nothing: Kafka's
                # SaslServerCallbackHandler authorizes the authenticated principal whatever is asked.
                principal = str(self.context.initiator_name)
                try:
                    self.user = self.settings.namer.short_name(principal)
                except NoMatchingRule as exc:
                    raise AuthenticationFailed(f"Authentication failed: {exc}") from None
                self.stage = 3
                return b""
        except gssapi.exceptions.GSSError as exc:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials with "
                               f"SASL mechanism GSSAPI: {exc.gen_message()}") from None
        raise AuthenticationFailed("Unexpected GSSAPI token after authentication")
