"""ExpireDelegationToken (API key 40, KIP-48): the owner or a renewer brings a token's expiry forward;
a negative period removes it at once."""

from protocol.schema import BYTES, INT16, INT32, INT64, f, message

ExpireDelegationTokenRequest = message(
    "ExpireDelegationTokenRequest",
    [
        f("hmac", BYTES, about="The token's HMAC."),
        f("expiry_time_period_ms", INT64, about="How long from now the token lives; negative: removed now."),
    ],
    api_key=40,
    valid="0-2",
    flexible="2+",
)


ExpireDelegationTokenResponse = message(
    "ExpireDelegationTokenResponse",
    [
        f("error_code", INT16),
        f("expiry_timestamp_ms", INT64),
        f("throttle_time_ms", INT32),
    ],
    api_key=40,
    valid="0-2",
    flexible="2+",
)
