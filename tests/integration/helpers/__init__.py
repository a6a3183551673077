"""Helpers of the integration tests: clients, brokers and clusters they start, shared steps."""
