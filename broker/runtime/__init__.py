"""The coordinator runtime: what every coordinator (groups, transactions, and any later one) runs
on, once: partitions owned and loaded by replay, write operations answered once durable, reads
answered at the last durable write, timers fired as write operations, unloading and rebuilding."""
