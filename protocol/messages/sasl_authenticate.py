"""SaslAuthenticate (API key 36): one SASL token each way; v1 adds the session lifetime (KIP-368)."""

from protocol.schema import BYTES, INT16, INT64, STRING, f, message

SaslAuthenticateRequest = message(
    "SaslAuthenticateRequest",
    [
        f("auth_bytes", BYTES),
    ],
    api_key=36,
    valid="0-2",
    flexible="2+",
)

SaslAuthenticateResponse = message(
    "SaslAuthenticateResponse",
    [
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f("auth_bytes", BYTES),
        f("session_lifetime_ms", INT64, "1+", default=0, ignorable=True),
    ],
    api_key=36,
    valid="0-2",
    flexible="2+",
)
