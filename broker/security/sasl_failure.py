"""What every SASL exchange raises when it cannot go on (broker/security/sasl.py): its message is
what the client is told in SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The exchange failed: the message is given to the client in SASL_AUTHENTICATION_FAILED;
    ``detail``, when given, is what the broker logs instead (a reason the client is not told, as
    Kafka tells an OAUTHBEARER client only ``invalid_token``)."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail
