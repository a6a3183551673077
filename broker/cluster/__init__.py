"""Several kcoord nodes sharing the partitions: membership and ownership leased in etcd."""
