"""ApiVersions v5 and UnregisterBroker, which both ask about this node's identity: a v5 client may
name the cluster and node it means to reach (KIP-1242), and an administrator may unregister a
broker id (a running node is refused, an id no node has answers as Kafka's controller does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import ApiEntry
from broker.app import BrokerApp
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from protocol.codec import decode
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.unregister_broker import UnregisterBrokerRequest
from protocol.schema import Data
from tests.unit.server.apps import make_app


@pytest.fixture
def app(tmp_path: Path) -> Iterator[BrokerApp]:
    app = make_app(tmp_path)
    try:
        yield app
    finally:
        app.close()


def call(app: BrokerApp, key: ApiKey, version: int, body: Data) -> Any:
    """The handler's answer to one request, decoded as the client reads it."""
    entry: ApiEntry = next(e for e in app.table if e.key == key)
    flexible_header = entry.response.is_flexible(version) and key != ApiKey.ApiVersions
    reply = Reply(entry.response, version, 7, flexible_header)
    entry.handler(Request(body, reply, key, version, "test-client", "User:ANONYMOUS", "PLAINTEXT", "127.0.0.1",
                          ConnectionInfo(1, "127.0.0.1", 40000)))
    assert reply.data is not None
    header = 8 + (1 if flexible_header else 0)  # size, correlation id (and the header's tags)
    return decode(entry.response, reply.data[header:], version)


def api_versions(app: BrokerApp, version: int, cluster_id: str | None = None, node_id: int = -1,
                 software: str = "test") -> Any:
    return call(app, ApiKey.ApiVersions, version, ApiVersionsRequest(
        client_software_name=software, client_software_version="1", cluster_id=cluster_id, node_id=node_id))


def test_v5_naming_nothing_or_this_node_answers_as_v4(app: BrokerApp) -> None:
    v4 = api_versions(app, 4)
    assert v4.error_code == 0 and v4.api_keys
    assert api_versions(app, 5) == v4
    assert api_versions(app, 5, app.view.cluster_id, app.node_id) == v4
    assert (18, 0, 5) in {(k.api_key, k.min_version, k.max_version) for k in v4.api_keys}


@pytest.mark.parametrize(("who", "code"), [
    (("another-cluster", None), ErrorCode.REBOOTSTRAP_REQUIRED),  # None: this node's id
    ((None, 1), ErrorCode.REBOOTSTRAP_REQUIRED),  # None: this cluster; another node id
    ((None, -1), ErrorCode.INVALID_REQUEST),  # the cluster without the node
    (("-", None), ErrorCode.INVALID_REQUEST),  # the node without the cluster
], ids=["other-cluster", "other-node", "cluster-only", "node-only"])
def test_v5_refusals_carry_the_error_alone(app: BrokerApp, who: tuple[str | None, int | None], code: int) -> None:
    cluster, node = who
    cluster_id = app.view.cluster_id if cluster is None else (None if cluster == "-" else cluster)
    node_id = app.node_id if node is None else (app.node_id + node if node > 0 else node)
    answer = api_versions(app, 5, cluster_id, node_id)
    assert (answer.error_code, answer.api_keys, answer.supported_features, answer.finalized_features,
            answer.finalized_features_epoch) == (code, [], [], [], -1)


def test_v5_checks_the_client_software_too(app: BrokerApp) -> None:
    answer = api_versions(app, 5, software="not valid!")
    assert (answer.error_code, answer.api_keys) == (ErrorCode.INVALID_REQUEST, [])
    # v3 and v4 answer as they always have: the error with the APIs.
    older = api_versions(app, 4, software="not valid!")
    assert older.error_code == ErrorCode.INVALID_REQUEST and older.api_keys


def test_unregister_a_broker_id_no_node_has(app: BrokerApp) -> None:
    answer = call(app, ApiKey.UnregisterBroker, 0, UnregisterBrokerRequest(broker_id=app.node_id + 41))
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {app.node_id + 41} is not currently registered")


def test_unregister_the_running_node_is_refused(app: BrokerApp) -> None:
    answer = call(app, ApiKey.UnregisterBroker, 0, UnregisterBrokerRequest(broker_id=app.node_id))
    assert answer.error_code == ErrorCode.POLICY_VIOLATION
    assert "running" in answer.error_message
