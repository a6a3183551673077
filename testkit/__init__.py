"""What tests and benchmarks share to run real processes: ports, and the reference Apache Kafka."""
