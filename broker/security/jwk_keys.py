"""The cryptography behind signed OAUTHBEARER tokens (``broker.security.oidc``): a JWK's public key,
and a JWS signature checked with it. Its own module, imported only when a key is parsed or a token
verified, so that a broker that verifies no signed tokens never loads ``cryptography`` (about 7 MB
of memory at startup)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, tuple[ec.EllipticCurve, int]] = {
    "P-256": (ec.SECP256R1(), 32), "P-384": (ec.SECP384R1(), 48), "P-521": (ec.SECP521R1(), 66)}


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _uint(value: object) -> int:
    if not isinstance(value, str):
        raise ValueError("not a base64url string")
    return int.from_bytes(_b64(value), "big")


def public_key(jwk: Mapping[str, object]) -> object | None:
    """The key of an RSA, EC (P-256/384/521) or OKP (Ed25519/Ed448) JWK; None for any other.
    Raises ValueError, TypeError or binascii.Error for a malformed one."""
    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_uint(jwk.get("e")), _uint(jwk.get("n"))).public_key()
    if kty == "EC":
        curve = _CURVES.get(str(jwk.get("crv")))
        if curve is None:
            return None
        return ec.EllipticCurvePublicNumbers(_uint(jwk.get("x")), _uint(jwk.get("y")), curve[0]).public_key()
    if kty == "OKP" and jwk.get("crv") in ("Ed25519", "Ed448"):
        raw = _b64(str(jwk.get("x")))
        return (Ed25519PublicKey if jwk.get("crv") == "Ed25519" else Ed448PublicKey).from_public_bytes(raw)
    return None


def verify(public: object, alg: str, ec_curve: str | None, signing_input: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``alg``'s over ``signing_input`` by ``public`` (``ec_curve``: the
    curve an ES algorithm names, None for the others)."""
    try:
        if alg.startswith("RS") and isinstance(public, rsa.RSAPublicKey):
            public.verify(signature, signing_input, padding.PKCS1v15(), _HASHES[alg[2:]]())
        elif alg.startswith("PS") and isinstance(public, rsa.RSAPublicKey):
            digest = _HASHES[alg[2:]]()
            public.verify(signature, signing_input, padding.PSS(padding.MGF1(digest), digest.digest_size), digest)
        elif ec_curve is not None and isinstance(public, ec.EllipticCurvePublicKey):
            size = _CURVES[ec_curve][1]
            if len(signature) != 2 * size:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big"))
            public.verify(der, signing_input, ec.ECDSA(_HASHES[alg[2:]]()))
        elif alg == "EdDSA" and isinstance(public, (Ed25519PublicKey, Ed448PublicKey)):
            public.verify(signature, signing_input)
        else:
            return False
    except InvalidSignature:
        return False
    return True
