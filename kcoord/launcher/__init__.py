"""`kcoord serve --nodes N`: N node processes of one cluster on one host and one data directory.

- ``layout``: what each node is told (node.id, listeners, advertised listeners, HTTP endpoints);
- ``private_etcd``: the single-member etcd the launcher runs when no etcd.endpoints is given;
- ``supervisor``: runs the children, restarts a node that dies, stops them all on SIGTERM/SIGINT;
- ``process``: a child process that gets SIGTERM when the launcher dies, awaited on a pidfd;
- ``run``: puts them together for the `serve` command.
"""
