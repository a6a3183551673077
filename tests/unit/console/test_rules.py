"""Who the console's user is: a client certificate's principal as the broker's SSL listeners map
it, else the basic credentials' user."""

from __future__ import annotations

import base64

from broker.console.rules import Rules
from broker.security.tls import PrincipalMapper


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _rules() -> Rules:
    return Rules(None, [], lambda user, password: (user, password) == ("alice", "secret"),
                 PrincipalMapper("RULE:^CN=([^,]+),O=Shop$/$1/L"))


def test_a_certificate_is_the_user_as_the_mapping_rules_name_it() -> None:
    rules = _rules()
    assert rules.authenticate(None, "CN=Bob,O=Shop") == "User:bob"
    # The certificate is the user: credentials beside it are not read.
    assert rules.authenticate(_basic("alice", "secret"), "CN=Bob,O=Shop") == "User:bob"
    # A subject no rule maps is not authenticated, whatever else the request carries.
    assert rules.authenticate(_basic("alice", "secret"), "CN=carol,O=Elsewhere") is None


def test_without_a_certificate_the_basic_credentials_are_checked() -> None:
    rules = _rules()
    assert rules.authenticate(_basic("alice", "secret")) == "User:alice"
    assert rules.authenticate(_basic("alice", "wrong")) is None
    assert rules.authenticate(None) is None
