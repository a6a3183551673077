"""`kcoord health`: is a broker up, has every shard it owns loaded, and what does it own?"""

from __future__ import annotations

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest

OFFSETS_TOPIC = "__consumer_offsets"


def ownership(client: WireClient, port: int) -> str:
    """Which node this is and which ``__consumer_offsets`` partitions it leads, from Metadata:
    the same view a client gets (in a cluster, every live node and each partition's owner)."""
    meta = client.call(ApiKey.Metadata, 9, MetadataRequest(
        topics=[MetadataRequest.Topic(name=OFFSETS_TOPIC)], allow_auto_topic_creation=False))
    nodes = {b.node_id for b in meta.brokers}
    me = next((b.node_id for b in meta.brokers if b.port == port), None)
    leaders = [p.leader_id for t in meta.topics if t.name == OFFSETS_TOPIC for p in t.partitions]
    owned = sum(1 for leader in leaders if leader == me)
    orphaned = sum(1 for leader in leaders if leader < 0)
    text = (f"node {me if me is not None else '?'}, {len(nodes)} live node(s), owns {owned} of "
            f"{len(leaders)} {OFFSETS_TOPIC} partitions")
    return text + (f", {orphaned} without an owner" if orphaned else "")


def check(bootstrap: str, timeout: float) -> int:
    """Prints healthy/unhealthy and returns the exit status: 0 when the broker answers ApiVersions
    and ListGroups (which answers COORDINATOR_LOAD_IN_PROGRESS until every shard has loaded)."""
    host, _, port = bootstrap.rpartition(":")
    state = ""
    try:
        with WireClient(host or "127.0.0.1", int(port), client_id="kcoord-health", timeout=timeout) as client:
            versions = client.call(ApiKey.ApiVersions, 0, ApiVersionsRequest())
            if versions.error_code:
                print(f"unhealthy: ApiVersions error {versions.error_code}")
                return 1
            # ListGroups answers COORDINATOR_LOAD_IN_PROGRESS until every shard has loaded.
            groups = client.call(ApiKey.ListGroups, 0, ListGroupsRequest())
            if groups.error_code:
                print(f"unhealthy: ListGroups error {groups.error_code} (shards still loading?)")
                return 1
            state = ownership(client, int(port))
    except (OSError, ConnectionError, ValueError) as exc:
        print(f"unhealthy: {exc}")
        return 1
    print(f"healthy: {state}")
    return 0
