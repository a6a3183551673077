"""Ordinary topics: the catalog, the data plane's partition state, idempotent producers."""
