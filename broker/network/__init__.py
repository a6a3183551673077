"""Connections: framing, readiness, routing by API key, ordered replies."""
