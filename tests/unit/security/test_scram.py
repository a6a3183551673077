"""SCRAM as RFC 7677 spells it out, and PLAIN checked against the same stored credentials."""

from __future__ import annotations

import base64

import pytest

from broker.security.scram import ScramCredential, ScramError, ScramServer


def _server(password: str = "pencil", mechanism: str = "SCRAM-SHA-256") -> ScramServer:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password(mechanism, password, 4096, salt)
    return ScramServer(mechanism, lambda user, mech: credential if user == "user" else None)


def test_rfc_7677_example_exchange() -> None:
    server = _server()
    first = server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    # The server's half of the nonce is random: the RFC's is substituted to replay its example.
    server.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    server.server_first = f"r={server.nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert first.startswith(b"r=rOprNGfwEbeRWgbNEkqO") and first.endswith(b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_wrong_proof_unknown_user_and_bad_messages_fail() -> None:
    server = _server(password="not-pencil")
    server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    server.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    server.server_first = f"r={server.nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    with pytest.raises(ScramError, match="Invalid user credentials"):
        _server().first(b"n,,n=nobody,r=abc")
    for bad in (b"", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=us=er,r=abc", b"\xff"):
        with pytest.raises(ScramError):
            _server().first(bad)


def test_plain_password_check_uses_the_scram_credential() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-512", "s3cret")
    assert credential.password_matches("s3cret")
    assert not credential.password_matches("s3cret ")


def test_plain_checks_a_proven_password_again_without_deriving_it() -> None:
    from broker.security.credentials import CredentialStore

    store = CredentialStore(None)
    store.bootstrap([("alice", "s3cret")])
    derived = 0
    original = ScramCredential.password_matches

    def counting(self: ScramCredential, password: str) -> bool:
        nonlocal derived
        derived += 1
        return original(self, password)

    ScramCredential.password_matches = counting  # type: ignore[method-assign]
    try:
        assert store.check_password("alice", "s3cret") and derived == 1
        assert store.check_password("alice", "s3cret") and derived == 1  # proven once, not derived again
        assert not store.check_password("alice", "wrong") and derived == 1
        # A new credential (AlterUserScramCredentials) is proven afresh: the old password no longer holds.
        store.upsert("alice", ScramCredential.from_password("SCRAM-SHA-512", "n3w"))
        assert not store.check_password("alice", "s3cret") and derived == 2
        assert store.check_password("alice", "n3w") and derived == 3
    finally:
        ScramCredential.password_matches = original  # type: ignore[method-assign]
