"""Client quotas: the quota configs (DescribeClientQuotas, AlterClientQuotas), their durable store,
and their enforcement (byte rates and request time over Kafka's sample windows, throttle times and
muted connections)."""
