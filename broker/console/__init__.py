"""The kcoord console: a read-only web view of the cluster and its groups (overview, groups,
each group's members, offsets, lag and rebalance timeline with the doctor's findings), served
inside the broker's trio loop and fed by the same wire-protocol reads as ``kcoord groups``.

- ``timeline``: journal events -> rebalance spans and membership changes, drawn as inline SVG;
- ``state``: what a page shows, read over the Kafka protocol (blocking; run in worker threads);
- ``pages``: server-rendered HTML of each page;
- ``web``: the ASGI application (routes, live updates, bad input);
- ``server``: serving it with Hypercorn on the broker's trio loop.
"""
