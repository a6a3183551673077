"""Kafka's security model: listeners with their security protocols, TLS, SASL (PLAIN and SCRAM),
SCRAM credentials and the ACL authorizer."""
