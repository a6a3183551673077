"""CreateDelegationToken (API key 38, KIP-48): a token for the requester (or, v3, for another owner)
that clients then authenticate with over SCRAM; the answer carries its id and HMAC, the password."""

from protocol.schema import BYTES, INT16, INT32, INT64, STRING, array, f, message

CreateDelegationTokenRequest = message(
    "CreateDelegationTokenRequest",
    [
        f("owner_principal_type", STRING, "3+", nullable="3+",
          about="The owner's principal type; null: the requester."),
        f("owner_principal_name", STRING, "3+", nullable="3+",
          about="The owner's principal name; null: the requester."),
        f("renewers", array("CreatableRenewers", f("principal_type", STRING), f("principal_name", STRING)),
          about="Who may renew the token besides its owner."),
        f("max_lifetime_ms", INT64, about="The token's maximum lifetime, or -1 for the broker's."),
    ],
    api_key=38,
    valid="0-3",
    flexible="2+",
)


CreateDelegationTokenResponse = message(
    "CreateDelegationTokenResponse",
    [
        f("error_code", INT16),
        f("principal_type", STRING, about="The owner's principal type."),
        f("principal_name", STRING, about="The owner's principal name."),
        f("token_requester_principal_type", STRING, "3+"),
        f("token_requester_principal_name", STRING, "3+"),
        f("issue_timestamp_ms", INT64),
        f("expiry_timestamp_ms", INT64),
        f("max_timestamp_ms", INT64),
        f("token_id", STRING),
        f("hmac", BYTES, about="HMAC-SHA512 of the token id under delegation.token.secret.key."),
        f("throttle_time_ms", INT32),
    ],
    api_key=38,
    valid="0-3",
    flexible="2+",
)
