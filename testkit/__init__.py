"""What tests and benchmarks share to run real processes: loopback ports (``ports``), kcoord
itself (``kcoord``), etcd (``etcd``) and the reference Apache Kafka (``kafka``), each started and
awaited until it serves."""
