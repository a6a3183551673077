"""A fault checker for a kcoord cluster: a seeded nemesis (pauses, kills, etcd outages, network
cuts), real Kafka clients writing an operation history, and a checker that reads only that history
and a final read-back of every partition. Nothing here imports the broker: it talks to the cluster
over the wire, as any client does."""
