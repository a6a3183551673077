"""RenewDelegationToken (API key 39, KIP-48): the owner or a renewer moves a token's expiry, never past
its maximum lifetime."""

from protocol.schema import BYTES, INT16, INT32, INT64, f, message

RenewDelegationTokenRequest = message(
    "RenewDelegationTokenRequest",
    [
        f("hmac", BYTES, about="The token's HMAC."),
        f("renew_period_ms", INT64, about="How long from now the token lives; -1: delegation.token.expiry.time.ms."),
    ],
    api_key=39,
    valid="0-2",
    flexible="2+",
)


RenewDelegationTokenResponse = message(
    "RenewDelegationTokenResponse",
    [
        f("error_code", INT16),
        f("expiry_timestamp_ms", INT64),
        f("throttle_time_ms", INT32),
    ],
    api_key=39,
    valid="0-2",
    flexible="2+",
)
