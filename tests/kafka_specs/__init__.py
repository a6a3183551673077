"""Kafka 4.1's message specs for what no client library here ships: the KIP-848 APIs (68, 69) and
the consumer-group records of ``__consumer_offsets``, transcribed field by field in Kafka's JSON
notation (descriptions left out). Tests compare our tables with them, and kafka-python generates
an independent codec from the API specs. Record keys are declared at the version that names their
record type, as before Kafka 4.0 (4.x writes the same bytes as its ``apiKey``). Later files are
Kafka 4.4's specs as its jar ships them: the APIs kafka-python does not ship (share groups,
streams groups, telemetry, UnregisterBroker) and ApiVersions, whose v5 kafka-python's copy lacks
(preferred over it by ``tests/unit/protocol/specs.py``)."""
