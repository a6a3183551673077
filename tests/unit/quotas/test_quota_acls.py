"""With the authorizer on, DescribeClientQuotas needs DescribeConfigs on the cluster and
AlterClientQuotas AlterConfigs (which implies DescribeConfigs), as Kafka checks them; a denied
request is answered CLUSTER_AUTHORIZATION_FAILED for every entry and changes nothing."""

from __future__ import annotations

from pathlib import Path

from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from broker.security.acl_model import AclBinding, Operation, PatternType, Permission, ResourceType
from protocol.codec import decode
from protocol.messages import ApiKey
from protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from protocol.schema import Data
from tests.unit.server.apps import make_app

CLUSTER_AUTHORIZATION_FAILED = 31
Entry = AlterClientQuotasRequest.EntryData


def call(app: object, key: int, body: Data, principal: str) -> Data:
    api = app.router.apis[key]  # type: ignore[attr-defined]
    reply = Reply(api.response, 1, 7, True)
    req = Request(body, reply, key, 1, "c", principal, "PLAINTEXT", "127.0.0.1", ConnectionInfo(1, "127.0.0.1", 1))
    if api.authorize is None or not api.authorize(req):
        api.handler(req)
    assert reply.data is not None
    # size, correlation id, tagged fields of the flexible response header
    return decode(api.response, reply.data[9:], 1)


def test_quota_apis_need_the_cluster_config_operations(tmp_path: Path) -> None:
    app = make_app(tmp_path, "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    try:
        authorizer = app.security.authorizer
        assert authorizer is not None
        authorizer.add([AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:ops", "*",
                                   Operation.ALTER_CONFIGS, Permission.ALLOW)])
        alter = AlterClientQuotasRequest(validate_only=False, entries=[Entry(
            entity=[Entry.EntityData(entity_type="user", entity_name="alice")],
            ops=[Entry.OpData(key="producer_byte_rate", value=100.0, remove=False)])])
        denied: AlterClientQuotasResponse = call(app, ApiKey.AlterClientQuotas, alter, "User:bob")  # type: ignore[assignment]
        assert [e.error_code for e in denied.entries] == [CLUSTER_AUTHORIZATION_FAILED]
        assert app.quotas.quotas == {}
        allowed: AlterClientQuotasResponse = call(app, ApiKey.AlterClientQuotas, alter, "User:ops")  # type: ignore[assignment]
        assert [e.error_code for e in allowed.entries] == [0]
        describe = DescribeClientQuotasRequest(components=[], strict=False)
        refused: DescribeClientQuotasResponse = call(app, ApiKey.DescribeClientQuotas, describe, "User:bob")  # type: ignore[assignment]
        assert refused.error_code == CLUSTER_AUTHORIZATION_FAILED and refused.entries is None
        shown: DescribeClientQuotasResponse = call(app, ApiKey.DescribeClientQuotas, describe, "User:ops")  # type: ignore[assignment]
        assert shown.error_code == 0 and len(shown.entries or []) == 1
    finally:
        app.close()
