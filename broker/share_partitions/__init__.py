"""Share partitions (KIP-932) on the node leading their topic partitions: ``core/`` the pure share
partition, ``service/`` share sessions, fetches and acknowledgements over the logs, their state made
durable through the share coordinator."""
