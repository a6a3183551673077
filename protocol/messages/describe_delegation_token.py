"""DescribeDelegationToken (API key 41, KIP-48): the tokens of some owners (null: every token the
requester may see; an empty list: none), each with its HMAC and renewers."""

from protocol.schema import BYTES, INT16, INT32, INT64, STRING, array, f, message

DescribeDelegationTokenRequest = message(
    "DescribeDelegationTokenRequest",
    [
        f("owners", array("Owner", f("principal_type", STRING), f("principal_name", STRING)),
          nullable="0+", about="Whose tokens (owner, requester or renewer); null: every token."),
    ],
    api_key=41,
    valid="0-3",
    flexible="2+",
)


DescribeDelegationTokenResponse = message(
    "DescribeDelegationTokenResponse",
    [
        f("error_code", INT16),
        f(
            "tokens",
            array(
                "DescribedDelegationToken",
                f("principal_type", STRING),
                f("principal_name", STRING),
                f("token_requester_principal_type", STRING, "3+"),
                f("token_requester_principal_name", STRING, "3+"),
                f("issue_timestamp", INT64),
                f("expiry_timestamp", INT64),
                f("max_timestamp", INT64),
                f("token_id", STRING),
                f("hmac", BYTES),
                f("renewers", array("DescribedDelegationTokenRenewer", f("principal_type", STRING),
                                    f("principal_name", STRING))),
            ),
        ),
        f("throttle_time_ms", INT32),
    ],
    api_key=41,
    valid="0-3",
    flexible="2+",
)
