"""UnregisterBroker (API key 64, KIP-631): an administrator removes a broker's registration
(``kafka-cluster.sh unregister --id N``)."""

from protocol.schema import INT16, INT32, STRING, f, message

UnregisterBrokerRequest = message(
    "UnregisterBrokerRequest",
    [
        f("broker_id", INT32),
    ],
    api_key=64,
    valid="0",
    flexible="0+",
)

UnregisterBrokerResponse = message(
    "UnregisterBrokerResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
    ],
    api_key=64,
    valid="0",
    flexible="0+",
)
