"""``sasl.kerberos.principal.to.local.rules`` as Kafka's KerberosShortNamer applies them (the cases
of Kafka's own KerberosNameTest), and the default realm read from krb5.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.security.kerberos import KerberosShortNamer, NoMatchingRule, default_realm, parse_rules


def test_default_takes_the_first_component_of_the_default_realm() -> None:
    namer = KerberosShortNamer("DEFAULT", "REALM.COM")
    assert namer.short_name("alice@REALM.COM") == "alice"
    assert namer.short_name("kafka/host.example@REALM.COM") == "kafka"
    assert namer.short_name("plain") == "plain"
    with pytest.raises(NoMatchingRule):
        namer.short_name("alice@OTHER.COM")


def test_rules_as_kafkas_tests_write_them() -> None:
    rules = ("RULE:[1:$1@$0](App\\..*@REALM\\.COM)s/App\\.(.*)@REALM\\.COM/$1/g,"
             "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g,"
             "RULE:[1:$1@$0](.*@REALM.COM)s/@.*//L,"
             "DEFAULT")
    namer = KerberosShortNamer(rules, "REALM.COM")
    assert namer.short_name("App.service-name/example.com@REALM.COM") == "service-name"
    assert namer.short_name("App.service-name@REALM.COM") == "service-name"
    assert namer.short_name("User@REALM.COM") == "user"  # /L: lower case
    assert namer.short_name("user/host@REALM.COM") == "user"  # DEFAULT
    upper = KerberosShortNamer("RULE:[1:$1]/U", "REALM.COM")
    assert upper.short_name("alice@REALM.COM") == "ALICE"


def test_a_rule_that_leaves_a_non_simple_name_and_bad_rules_are_refused() -> None:
    with pytest.raises(NoMatchingRule):
        KerberosShortNamer("RULE:[1:$1@$0]", "REALM.COM").short_name("alice@REALM.COM")
    for bad in ("RULE:", "NOTARULE", "RULE:[1:$1](x"):
        with pytest.raises(ValueError):
            parse_rules(bad)


def test_the_default_realm_comes_from_krb5_conf(tmp_path: Path) -> None:
    conf = tmp_path / "krb5.conf"
    conf.write_text("[libdefaults]\n  default_realm = KCOORD.TEST\n[realms]\n  KCOORD.TEST = {\n  }\n")
    assert default_realm(conf) == "KCOORD.TEST"
    assert default_realm(tmp_path / "missing.conf") == ""
