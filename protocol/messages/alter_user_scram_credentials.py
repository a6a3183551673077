"""AlterUserScramCredentials (API key 51): SCRAM credentials to delete and to create or replace; an
upsertion carries the salted password, never the password."""

from protocol.schema import BYTES, INT8, INT16, INT32, STRING, array, f, message

AlterUserScramCredentialsRequest = message(
    "AlterUserScramCredentialsRequest",
    [
        f("deletions", array("ScramCredentialDeletion", f("name", STRING), f("mechanism", INT8))),
        f(
            "upsertions",
            array(
                "ScramCredentialUpsertion",
                f("name", STRING),
                f("mechanism", INT8),
                f("iterations", INT32),
                f("salt", BYTES),
                f("salted_password", BYTES),
            ),
        ),
    ],
    api_key=51,
    valid="0",
    flexible="0+",
)


AlterUserScramCredentialsResponse = message(
    "AlterUserScramCredentialsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "results",
            array(
                "Result",
                f("user", STRING),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
            ),
        ),
    ],
    api_key=51,
    valid="0",
    flexible="0+",
)
