"""Who may do a console action: the signed-in user (HTTP basic, checked against the broker's SCRAM
credentials, or over an https console the client certificate's principal) and, for each request the action sends, the authorization rule the API table gives
that API (``broker/apis.py``, ``RequestChecks`` over the broker's authorizer), asked with the
user's principal and address exactly as for a request arriving on the wire. One owner for each
rule: nothing here knows which ACL an API needs."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Protocol

from broker.console.actions import CLIENT_ID, Amend, denial
from broker.handlers.request_checks import RequestChecks
from broker.network.reply import Reply, first_error_code
from broker.network.router import ConnectionInfo, Request
from broker.security.tls import DEFAULT_MAPPER, NoMatchingRule, PrincipalMapper
from protocol.codec import encode
from protocol.schema import Data, Message

LISTENER = "console"


class TableEntry(Protocol):
    """What the rules need of one entry of the API table (``broker.apis.ApiEntry``, which only the
    broker's root builds and imports)."""

    @property
    def key(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def request(self) -> Message: ...
    @property
    def response(self) -> Message: ...
    @property
    def authorize(self) -> Callable[[RequestChecks, Request[Data], Callable[[Request[Data], int], Data]], bool]: ...
    @property
    def refuse(self) -> Callable[[Request[Data], int], Data]: ...


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """User and password of an ``Authorization: Basic`` header, None without a usable one."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else None


class Rules:
    """The API table's authorization rules, asked for one principal at a time (on the broker's
    loop: the authorizer's ACLs change there)."""

    def __init__(self, checks: RequestChecks | None, table: Sequence[TableEntry],
                 check_password: Callable[[str, str], bool], mapper: PrincipalMapper = DEFAULT_MAPPER) -> None:
        # None: the authorizer is off, and the wire lets every client do everything.
        self.checks = checks
        self.entries = {entry.key: entry for entry in table}
        self.check_password = check_password
        self.mapper = mapper  # ssl.principal.mapping.rules, as the broker's SSL listeners map subjects

    def authenticate(self, header: str | None, certificate: str | None = None) -> str | None:
        """The principal of a request: with a client certificate (its subject, RFC 2253), the one
        the broker's SSL listeners give it (``User:`` and the name ssl.principal.mapping.rules make
        of the subject), None when no rule applies, as such a client is not authenticated on the
        wire; without one, its basic credentials' (``User:name``), None if they are wrong."""
        if certificate is not None:
            try:
                return "User:" + self.mapper.name_for(certificate)
            except NoMatchingRule:
                return None
        credentials = basic_credentials(header)
        if credentials is None or not self.check_password(*credentials):
            return None
        return "User:" + credentials[0]

    def check(self, principal: str, host: str, api_key: int, version: int, body: Data) -> Amend | None:
        """Puts one request to its API's rule as ``principal`` from ``host``. Refused in whole or
        in part (the rule answers it, or removes denied parts from it): raises ``Denied``.
        Otherwise what the rule would change in the answer (its filters), or None."""
        if self.checks is None:
            return None
        entry = self.entries[api_key]
        before = encode(entry.request, body, version)
        reply = Reply(entry.response, version, 0, False)
        request: Request[Data] = Request(body, reply, api_key, version, CLIENT_ID, principal, LISTENER, host,
                                         ConnectionInfo(0, host, 0, LISTENER, principal))
        answered = entry.authorize(self.checks, request, entry.refuse)
        if answered or encode(entry.request, request.body, version) != before:
            # The refusal's error: the answer's, or the one the removed parts are put back with.
            code = reply.error_code if answered else 0
            if not code and reply.amend is not None:
                code = first_error_code(reply.amend(entry.response.cls()))
            raise denial(principal, entry.name, code)
        return reply.amend
