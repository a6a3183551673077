"""Client telemetry (KIP-714): client-metrics subscriptions, GetTelemetrySubscriptions and
PushTelemetry, and the pushed OpenTelemetry metrics exported on /metrics."""
