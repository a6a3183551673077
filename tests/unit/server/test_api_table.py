"""The table of APIs (broker/apis.py): every API the broker advertises is declared there once, and
every declaration is complete: request and response of the same API, versions both can encode, a
handler, an authorization rule, and an answer for a refused request that encodes at every version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.apis import OPEN_TO_ALL, ApiEntry
from broker.app import BrokerApp
from broker.handlers.request_checks import RequestChecks
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from protocol.codec import decode, encode
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.schema import Data
from tests.unit.server.apps import make_app


@pytest.fixture
def app(tmp_path: Path) -> Iterator[BrokerApp]:
    app = make_app(tmp_path)
    try:
        yield app
    finally:
        app.close()


def request_for(entry: ApiEntry, version: int, body: Data | None = None) -> Request[Data]:
    # ApiVersions answers with response header v0 whatever its version (KIP-511).
    reply = Reply(entry.response, version, 7, entry.response.is_flexible(version) and entry.key != ApiKey.ApiVersions)
    return Request(entry.request.cls() if body is None else body, reply, entry.key, version, "test-client",
                   "User:ANONYMOUS", "PLAINTEXT", "127.0.0.1", ConnectionInfo(1, "127.0.0.1", 40000))


def test_every_advertised_api_has_exactly_one_entry(app: BrokerApp) -> None:
    keys = [entry.key for entry in app.table]
    assert len(keys) == len(set(keys))
    assert sorted(keys) == [key for key, _, _ in app.router.advertised()]
    assert {entry.name for entry in app.table} == {ApiKey(key).name for key in keys}


def test_every_entry_is_complete(app: BrokerApp) -> None:
    for entry in app.table:
        assert entry.request.api_key == entry.key, entry.name
        assert entry.request.name == entry.name + "Request", entry.name
        assert entry.response.name == entry.name + "Response", entry.name
        lo, hi = entry.versions
        assert entry.request.valid.low <= lo <= hi <= entry.request.valid.high, entry.name
        assert entry.response.valid.low <= lo and hi <= entry.response.valid.high, entry.name
        assert callable(entry.handler), entry.name
        # The rule is one of the authorizer's, named (not a closure made up for the table).
        assert getattr(RequestChecks, entry.authorize.__name__) is entry.authorize, entry.name
        for version in range(lo, hi + 1):
            refused = entry.refuse(request_for(entry, version), ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            assert type(refused) is entry.response.cls, entry.name
            encoded = encode(entry.response, refused, version)
            assert decode(entry.response, encoded, version) is not None


def test_the_router_serves_the_table(app: BrokerApp) -> None:
    for entry in app.table:
        api = app.router.apis[entry.key]
        assert (api.min_version, api.max_version) == entry.versions
        assert api.handler is entry.handler
        assert api.authorize is None  # no authorizer configured


def test_with_the_authorizer_every_rule_but_the_open_ones_runs(tmp_path: Path) -> None:
    app = make_app(tmp_path, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users=User:admin")
    try:
        for entry in app.table:
            bound = app.router.apis[entry.key].authorize
            assert (bound is None) == (entry.authorize is OPEN_TO_ALL), entry.name
        open_apis = {e.name for e in app.table if e.authorize is OPEN_TO_ALL}
        # Kafka checks no ACL on the telemetry APIs (KIP-714): every authenticated client pushes. The
        # delegation-token APIs authorize in their handler, per owner and per token, as KafkaApis does.
        assert open_apis == {"ApiVersions", "SaslHandshake", "SaslAuthenticate", "GetTelemetrySubscriptions",
                             "PushTelemetry", "CreateDelegationToken", "RenewDelegationToken",
                             "ExpireDelegationToken", "DescribeDelegationToken"}
    finally:
        app.close()


def test_api_versions_answers_the_table(app: BrokerApp) -> None:
    entry = next(e for e in app.table if e.key == ApiKey.ApiVersions)
    req = request_for(entry, 3, ApiVersionsRequest(client_software_name="test", client_software_version="1"))
    entry.handler(req)
    assert req.reply.data is not None
    answer = decode(ApiVersionsResponse, req.reply.data[8:], 3)  # after the size and the correlation id
    assert answer.error_code == 0
    assert sorted((k.api_key, k.min_version, k.max_version) for k in answer.api_keys) == sorted(
        (e.key, *e.versions) for e in app.table)
