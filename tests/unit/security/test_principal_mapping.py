"""``ssl.principal.mapping.rules`` (KIP-371) read and applied as Kafka's SslPrincipalMapper does:
first matching rule wins, $n group references, L/U case, DEFAULT, escaped slashes, bad rules refused."""

from __future__ import annotations

import pytest

from broker.security.tls import NoMatchingRule, PrincipalMapper, principal_from_certificate

SUBJECT = (("countryName", "DE"),), (("organizationName", "Shop"),), (("organizationalUnitName", "ServiceUsers"),), \
    (("commonName", "Orders-App"),)


@pytest.mark.parametrize(("rules", "dn", "name"), [
    ("DEFAULT", "CN=app,O=Org", "CN=app,O=Org"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=kafka-app,OU=ServiceUsers,O=Org", "kafka-app"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L", "CN=Kafka-App,OU=ServiceUsers,O=Org", "kafka-app"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", "CN=Kafka-App,OU=ServiceUsers,O=Org", "KAFKA-APP"),
    # first rule that matches wins; DEFAULT catches the rest
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT", "CN=x,OU=Other", "CN=x,OU=Other"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/, RULE:^CN=(.*?)$/$1/", "CN=a,OU=b,O=c", "a@b"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/, RULE:^CN=(.*?)$/$1/", "CN=solo", "solo"),
    # an escaped slash inside the replacement, and spaces around the separators
    (r"  RULE:^CN=([^,]*).*$/svc\/$1/  ,  DEFAULT  ", "CN=app,O=Org", "svc/app"),
    # a reference past the last group is literal text (Kafka escapes it); $12 with one group is $1 then "2"
    ("RULE:^CN=([^,]*).*$/$1-$2/", "CN=app,O=Org", "app-$2"),
    ("RULE:^CN=([^,]*).*$/$12/", "CN=app,O=Org", "app2"),
    ("RULE:^CN=(.*)$/$0!/", "CN=app", "CN=app!"),
])
def test_rules_map_a_subject_as_kafka_does(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rules).name_for(dn) == name


def test_a_subject_no_rule_matches_is_refused() -> None:
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name_for("CN=x,OU=Other")


@pytest.mark.parametrize("rules", ["RULE:abc/x/Q", "garbage", "RULE:^(/x", "RULE:^CN=(.*)$/$x/", "", "RULE:(/x/"])
def test_bad_rules_are_refused_at_startup(rules: str) -> None:
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        PrincipalMapper(rules)


def test_the_certificate_principal_goes_through_the_rules() -> None:
    cert = {"subject": SUBJECT}
    assert principal_from_certificate(cert) == "User:CN=Orders-App,OU=ServiceUsers,O=Shop,C=DE"
    mapper = PrincipalMapper("RULE:^CN=([^,]+),OU=ServiceUsers,.*$/$1/L,DEFAULT")
    assert principal_from_certificate(cert, mapper) == "User:orders-app"
    assert principal_from_certificate(None, mapper) == "User:ANONYMOUS"
