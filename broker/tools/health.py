"""`kcoord health`: is a broker up, and has every shard loaded?"""

from __future__ import annotations

from broker.tools.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.list_groups import ListGroupsRequest


def check(bootstrap: str, timeout: float) -> int:
    """Prints healthy/unhealthy and returns the exit status: 0 when the broker answers ApiVersions
    and ListGroups (which answers COORDINATOR_LOAD_IN_PROGRESS until every shard has loaded)."""
    host, _, port = bootstrap.rpartition(":")
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
    except (OSError, ConnectionError, ValueError) as exc:
        print(f"unhealthy: {exc}")
        return 1
    print("healthy")
    return 0
