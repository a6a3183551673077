"""DescribeUserScramCredentials (API key 50): the SCRAM mechanisms and iterations of users (all when
the list is null). Mechanism 1 is SCRAM-SHA-256, 2 is SCRAM-SHA-512."""

from protocol.schema import INT8, INT16, INT32, STRING, array, f, message

DescribeUserScramCredentialsRequest = message(
    "DescribeUserScramCredentialsRequest",
    [
        f("users", array("UserName", f("name", STRING)), nullable="0+"),
    ],
    api_key=50,
    valid="0",
    flexible="0+",
)


DescribeUserScramCredentialsResponse = message(
    "DescribeUserScramCredentialsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f(
            "results",
            array(
                "Result",
                f("user", STRING),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
                f("credential_infos", array("CredentialInfo", f("mechanism", INT8), f("iterations", INT32))),
            ),
        ),
    ],
    api_key=50,
    valid="0",
    flexible="0+",
)
