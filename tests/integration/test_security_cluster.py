"""Users, ACLs and delegation tokens of a cluster live in etcd: an ACL created through one node is
enforced by the other, a SCRAM user created through one node authenticates on the other, and both
survive restarting every node (nothing of them is in the shared data dir); a delegation token
created through one node authenticates on the other until it is expired through either."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from testkit.etcd import EtcdProcess
from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.integration.helpers.cluster import Cluster, wait_for
from tests.integration.helpers.security import scram_wire_client

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
GROUP = "billing"


class SecureCluster(Cluster):
    """Nodes with a PLAINTEXT listener (User:ANONYMOUS) and a SASL_PLAINTEXT one, ACLs on."""

    def start_node(self, node_id: int) -> BrokerProcess:
        b = BrokerProcess(self.data_dir, {
            "node.id": str(node_id), "etcd.endpoints": self.etcd.endpoint, "cluster.id": self.cluster_id,
            "broker.session.timeout.ms": str(self.session_timeout_ms),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.bootstrap.users": "admin:admin-secret", "connection.failed.authentication.delay.ms": "0",
            "delegation.token.secret.key": "cluster-token-secret"})
        b.sasl_port = free_port()  # type: ignore[attr-defined]
        b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"  # type: ignore[attr-defined]
        b.overrides["advertised.listeners"] = ""
        b.log_path = self.tmp_path / f"node{node_id}-{b.port}.log"
        b.start()
        self.nodes[node_id] = b
        return b


def _sasl(b: BrokerProcess, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_port}", "security.protocol": "SASL_PLAINTEXT",  # type: ignore[attr-defined]
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def _find_coordinator_error(b: BrokerProcess) -> int:
    """What an anonymous client is told when it looks for the group's coordinator."""
    with WireClient("127.0.0.1", b.port, timeout=5) as c:
        return int(c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=GROUP, key_type=0)).error_code)


def _authenticates(b: BrokerProcess, user: str, password: str) -> bool:
    try:
        AdminClient(_sasl(b, user, password)).list_topics(timeout=4)
        return True
    except KafkaException:
        return False


def _eventually(check: Callable[[], bool], timeout: float = 60.0) -> None:
    wait_for(check, timeout, getattr(check, "__name__", "the check"), step=0.1)


def _let_anonymous_describe_and_add_user(b: BrokerProcess, user: str, password: str) -> None:
    """Through ``b``'s admin API: an ACL letting User:ANONYMOUS describe GROUP, and a SCRAM user."""
    admin = AdminClient(_sasl(b, "admin", "admin-secret"))
    acl = AclBinding(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                     AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in admin.create_acls([acl]).values():
        future.result(10)
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(10)


@pytest.fixture
def secure_cluster(etcd: EtcdProcess, tmp_path: Path) -> Iterator[SecureCluster]:
    c = SecureCluster(etcd, tmp_path)
    yield c
    c.stop_all()


def test_acls_and_users_created_on_one_node_hold_on_the_other_and_after_restarts(secure_cluster: SecureCluster) -> None:
    a, b = secure_cluster.start_node(1), secure_cluster.start_node(2)
    assert _find_coordinator_error(b) == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert not _authenticates(b, "carol", "carol-secret")

    _let_anonymous_describe_and_add_user(a, "carol", "carol-secret")

    _eventually(lambda: _find_coordinator_error(b) != ErrorCode.GROUP_AUTHORIZATION_FAILED)
    assert _authenticates(b, "carol", "carol-secret")
    assert not _authenticates(b, "carol", "wrong")
    assert not (secure_cluster.data_dir / "kcoord-acls.json").exists()
    assert not (secure_cluster.data_dir / "kcoord-scram-credentials.json").exists()

    secure_cluster.stop_all()
    secure_cluster.nodes.clear()
    a, b = secure_cluster.start_node(1), secure_cluster.start_node(2)
    assert _find_coordinator_error(a) != ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert _find_coordinator_error(b) != ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert _authenticates(a, "carol", "carol-secret")

    # Deleted through node B: node A denies again.
    admin = AdminClient(_sasl(b, "admin", "admin-secret"))
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(10)) for f in deleted.values()] == [1]
    _eventually(lambda: _find_coordinator_error(a) == ErrorCode.GROUP_AUTHORIZATION_FAILED)


def test_a_former_single_nodes_acls_and_users_are_imported_once(secure_cluster: SecureCluster, tmp_path: Path) -> None:
    """A single node's ACL and user files, put in the shared data dir, are in etcd after the first
    node starts; an ACL deleted in the cluster stays deleted when a node restarts."""
    single = BrokerProcess(tmp_path / "single", {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.bootstrap.users": "admin:admin-secret"})
    single.sasl_port = free_port()  # type: ignore[attr-defined]
    single.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{single.port},SASL_PLAINTEXT://127.0.0.1:{single.sasl_port}"  # type: ignore[attr-defined]
    single.overrides["advertised.listeners"] = ""
    single.start()
    try:
        _let_anonymous_describe_and_add_user(single, "dave", "dave-secret")
    finally:
        assert single.stop() == 0
    secure_cluster.data_dir.mkdir(parents=True, exist_ok=True)
    for name in ("kcoord-acls.json", "kcoord-scram-credentials.json"):
        (secure_cluster.data_dir / name).write_bytes((tmp_path / "single" / name).read_bytes())

    a = secure_cluster.start_node(1)
    assert _find_coordinator_error(a) != ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert _authenticates(a, "dave", "dave-secret")
    assert "security.files_imported acls=1 users=2" in a.log()

    admin = AdminClient(_sasl(a, "admin", "admin-secret"))
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, None, None,
                                                  AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(10)) for f in deleted.values()] == [1]
    secure_cluster.stop_all()
    secure_cluster.nodes.clear()
    b = secure_cluster.start_node(2)
    assert _find_coordinator_error(b) == ErrorCode.GROUP_AUTHORIZATION_FAILED  # not imported a second time
    assert _authenticates(b, "dave", "dave-secret")


def _admin_wire(b: BrokerProcess) -> WireClient:
    c = WireClient("127.0.0.1", b.sasl_port, timeout=10)  # type: ignore[attr-defined]
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
        auth_bytes=b"\0admin\0admin-secret")).error_code == 0
    return c


def test_a_delegation_token_created_on_one_node_authenticates_on_the_other(secure_cluster: SecureCluster) -> None:
    a, b = secure_cluster.start_node(1), secure_cluster.start_node(2)
    created = _admin_wire(a).call(ApiKey.CreateDelegationToken, 3, CreateDelegationTokenRequest(
        owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime_ms=-1))
    assert created.error_code == 0
    password = base64.b64encode(created.hmac).decode()

    def token_authenticates(node: BrokerProcess) -> bool:
        _, code = scram_wire_client(node.sasl_port, created.token_id, password, "SCRAM-SHA-512",  # type: ignore[attr-defined]
                                    token=True)
        return code == 0

    assert token_authenticates(a)  # the node that created it answered once it was in etcd
    _eventually(lambda: token_authenticates(b))
    assert not (secure_cluster.data_dir / "kcoord-delegation-tokens.json").exists()
    expired = _admin_wire(b).call(ApiKey.ExpireDelegationToken, 2, ExpireDelegationTokenRequest(
        hmac=created.hmac, expiry_time_period_ms=-1))
    assert expired.error_code == 0
    assert not token_authenticates(b)
    _eventually(lambda: not token_authenticates(a))
