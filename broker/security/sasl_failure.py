"""What every SASL exchange raises when it cannot go on (broker/security/sasl.py): its message is
what the client is told in SASL_AUTHENTICATION_FAILED."""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """The exchange failed: the message is given to the client in SASL_AUTHENTICATION_FAILED."""
