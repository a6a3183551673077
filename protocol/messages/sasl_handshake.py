"""SaslHandshake (API key 17): the client names a SASL mechanism; v1 moves the exchange into SaslAuthenticate."""

from protocol.schema import INT16, STRING, ArrayOf, f, message

SaslHandshakeRequest = message(
    "SaslHandshakeRequest",
    [
        f("mechanism", STRING),
    ],
    api_key=17,
    valid="0-1",
)

SaslHandshakeResponse = message(
    "SaslHandshakeResponse",
    [
        f("error_code", INT16),
        f("mechanisms", ArrayOf(STRING)),
    ],
    api_key=17,
    valid="0-1",
)
