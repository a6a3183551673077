"""Listener lists, the protocol map and advertised addresses as Kafka reads them; the principal
of a client certificate as Kafka's default principal builder writes it."""

from __future__ import annotations

import pytest

from broker.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    ListenerError,
    ListenerSpec,
    parse_advertised,
    parse_listeners,
)
from broker.security.tls import principal_from_certificate


def test_four_listeners_with_their_protocols() -> None:
    specs = parse_listeners("PLAINTEXT://:9092,SSL://127.0.0.1:9093,SASL_PLAINTEXT://h:9094,SASL_SSL://[::1]:9095",
                            DEFAULT_PROTOCOL_MAP)
    assert specs == [ListenerSpec("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092), ListenerSpec("SSL", "SSL", "127.0.0.1", 9093),
                     ListenerSpec("SASL_PLAINTEXT", "SASL_PLAINTEXT", "h", 9094),
                     ListenerSpec("SASL_SSL", "SASL_SSL", "::1", 9095)]
    assert [s.tls for s in specs] == [False, True, False, True]
    assert [s.sasl for s in specs] == [False, False, True, True]


def test_custom_listener_names_map_to_protocols() -> None:
    specs = parse_listeners("INTERNAL://:9092,EXTERNAL://:9093", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL")
    assert [(s.name, s.protocol) for s in specs] == [("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "SASL_SSL")]
    advertised = parse_advertised("EXTERNAL://kafka.example:19093", specs)
    assert advertised == {"INTERNAL": ("127.0.0.1", 9092), "EXTERNAL": ("kafka.example", 19093)}


@pytest.mark.parametrize(("listeners", "protocol_map", "needle"), [
    ("OTHER://:1", DEFAULT_PROTOCOL_MAP, "listener.security.protocol.map"),
    ("PLAINTEXT://:1,PLAINTEXT://:2", DEFAULT_PROTOCOL_MAP, "once"),
    ("PLAINTEXT://:1,SSL://:1", DEFAULT_PROTOCOL_MAP, "share a port"),
    ("PLAINTEXT://h", DEFAULT_PROTOCOL_MAP, "no valid port"),
    ("A://:1", "A:KERBEROS", "listener.security.protocol.map"),
])
def test_bad_listener_settings_name_the_property(listeners: str, protocol_map: str, needle: str) -> None:
    with pytest.raises(ListenerError, match=needle):
        parse_listeners(listeners, protocol_map)


def test_advertising_an_unknown_listener_is_an_error() -> None:
    with pytest.raises(ListenerError, match=r"advertised\.listeners"):
        parse_advertised("SSL://h:1", parse_listeners("PLAINTEXT://:1", DEFAULT_PROTOCOL_MAP))


def test_certificate_subject_becomes_the_principal_most_specific_first() -> None:
    cert = {"subject": ((("countryName", "DE"),), (("organizationName", "Shop, Inc"),),
                        (("organizationalUnitName", "Payments"),), (("commonName", "orders"),))}
    assert principal_from_certificate(cert) == r"User:CN=orders,OU=Payments,O=Shop\, Inc,C=DE"
    assert principal_from_certificate(None) == "User:ANONYMOUS"
    assert principal_from_certificate({}) == "User:ANONYMOUS"
