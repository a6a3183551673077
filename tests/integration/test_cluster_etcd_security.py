"""A cluster whose etcd requires TLS client certificates (``--client-cert-auth``) and has its auth
on: kcoord nodes with a certificate of etcd's CA and an etcd user allowed only their prefix form a
cluster and serve; etcd refuses whoever lacks either; a node with a wrong password or a certificate
of another CA stops at startup with exit status 2 and one line saying why. The etcd is real, set up
with etcdctl as docs/cluster.md tells an operator to."""

from __future__ import annotations

import json
import os
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from broker.cluster.etcd import EtcdClient, b64
from broker.configs.node_config import BrokerConfig
from broker.security.etcd_access import etcd_client
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from testkit.etcd import ETCD_BINARY, ETCDCTL_BINARY, EtcdProcess
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import Cluster, commit_request, fetch_offset, read_partition
from tests.integration.helpers.dataplane_clients import confluent_produce
from tests.integration.helpers.etcd_security import EtcdPki, make_etcd_pki, node_overrides

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT_PASSWORD = "root-secret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> EtcdPki:
    return make_etcd_pki(tmp_path_factory.mktemp("etcd-pki"))


@pytest.fixture(scope="module")
def secure_etcd(pki: EtcdPki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    """etcd on HTTPS requiring client certificates of the test CA, with its auth on."""
    for binary, package in ((ETCD_BINARY, "etcd-server"), (ETCDCTL_BINARY, "etcd-client")):
        if not os.path.exists(binary):
            pytest.skip(f"{binary} is not installed (Debian package {package})")
    server = EtcdProcess(tmp_path_factory.mktemp("secure-etcd") / "data", tls=pki.etcd).start()
    try:
        server.enable_auth(ROOT_PASSWORD)
        yield server
    finally:
        server.stop()


def cluster_with_user(etcd: EtcdProcess, pki: EtcdPki, tmp_path: Path, *, p12: bool = False) -> tuple[Cluster, str]:
    """A cluster (no node started) and the etcd user of its prefix, allowed nothing else."""
    cluster = Cluster(etcd, tmp_path)
    user, password = f"kcoord-{cluster.cluster_id}", "n0de-secret"
    etcd.add_user(user, password, f"/kcoord/{cluster.cluster_id}/")
    cluster.overrides.update(node_overrides(pki, user, password, p12=p12))
    return cluster, password


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if " ERROR " in line]


def test_two_nodes_with_tls_and_credentials_form_a_cluster_and_serve(
        secure_etcd: EtcdProcess, pki: EtcdPki, tmp_path: Path) -> None:
    cluster, _ = cluster_with_user(secure_etcd, pki, tmp_path)
    try:
        cluster.start_node(1)
        # The second node reads its keystore as PKCS12, the first as PEM: the listeners' formats.
        cluster.overrides.update({"etcd.ssl.keystore.location": str(pki.kcoord_p12), "etcd.ssl.keystore.type": "PKCS12",
                                  "etcd.ssl.keystore.password": "p12-secret"})
        cluster.start_node(2)
        cluster.wait_spread({1, 2}, timeout=90)
        # A topic partition: produced to its leader and read back.
        bootstrap = ",".join(b.bootstrap for b in cluster.alive())
        create_topic(bootstrap, "etcd-tls", 1)
        confluent_produce(bootstrap, "etcd-tls", 0, 50)
        records, high = read_partition(bootstrap, "etcd-tls")
        assert high == 50 and sorted(records.values()) == sorted(b"m%d" % i for i in range(50))
        # A group on each node: an offset committed there and read back.
        for node in (1, 2):
            group = cluster.groups_on(node, 1)[0]
            with WireClient("127.0.0.1", cluster.nodes[node].port, timeout=10) as c:
                r = c.call(ApiKey.OffsetCommit, 2, commit_request(group, "etcd-tls", 42))
            assert r.topics[0].partitions[0].error_code == 0
            assert fetch_offset(cluster, group, "etcd-tls") == 42
        for b in cluster.nodes.values():
            log = b.log()
            assert "cluster.etcd_access" in log and "tls=True" in log, log[-3000:]
            assert "cluster.etcd_plaintext" not in log
            assert "cluster.etcd_refused" not in log
    finally:
        cluster.stop_all()


def _raw_request(pki: EtcdPki, port: int, *, cert: Path | None, path: str = "/v3/kv/range",
                 body: bytes = b"{}") -> tuple[int, str]:
    """An HTTPS POST to etcd, with or without a client certificate: (status, body)."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        context.load_cert_chain(str(cert))
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_etcd_refuses_a_client_without_a_certificate_or_credentials(secure_etcd: EtcdProcess, pki: EtcdPki,
                                                                     tmp_path: Path) -> None:
    cluster, password = cluster_with_user(secure_etcd, pki, tmp_path)
    prefix = f"/kcoord/{cluster.cluster_id}/"
    query = json.dumps({"key": b64(prefix), "range_end": b64(prefix[:-1] + "0")}).encode()
    port = secure_etcd.client_port
    # TLS without a client certificate: etcd ends the handshake.
    with pytest.raises((ssl.SSLError, ConnectionResetError, urllib.error.URLError)):
        _raw_request(pki, port, cert=None, body=query)
    # Plain HTTP to the TLS port: closed without an answer.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"POST /v3/kv/range HTTP/1.1\r\nHost: etcd\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                    % (len(query), query))
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    assert answer == b"" or answer.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")), answer[:200]  # closed unanswered
    # A certificate of etcd's CA but no credentials: auth is on, nothing is read.
    status, text = _raw_request(pki, port, cert=pki.kcoord_pem, body=query)
    assert status != 200 and ("permission denied" in text or "user name is empty" in text), (status, text)

    # The node's own user reads its prefix, and nothing else (another cluster's peer secret).
    async def reads() -> None:
        values = BrokerConfig.load(overrides=[
            f"etcd.endpoints={secure_etcd.endpoint}", f"cluster.id={cluster.cluster_id}",
            *(f"{k}={v}" for k, v in node_overrides(pki, f"kcoord-{cluster.cluster_id}", password).items())],
            environ={}).values
        client = etcd_client(values)
        await client.put(prefix + "probe", "1")
        kvs, _ = await client.get_prefix(prefix)
        assert [kv.key for kv in kvs] == [prefix + "probe"]
        with pytest.raises(Exception, match="permission denied"):
            await client.get_prefix("/kcoord/")

    trio.run(reads)


def _refused_start(cluster: Cluster, tmp_path: Path, **overrides: str) -> tuple[int, str]:
    node = BrokerProcess(tmp_path / "shared", {
        "node.id": "1", "etcd.endpoints": cluster.etcd.endpoint, "cluster.id": cluster.cluster_id,
        **cluster.overrides, **overrides})
    done = node.run_to_exit(timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_a_node_with_a_wrong_password_refuses_to_start(secure_etcd: EtcdProcess, pki: EtcdPki, tmp_path: Path) -> None:
    cluster, _ = cluster_with_user(secure_etcd, pki, tmp_path)
    code, output = _refused_start(cluster, tmp_path, **{"etcd.password": "not-the-password"})
    assert code == 2, output
    errors = error_lines(output)
    assert len(errors) == 1 and "cluster.etcd_refused" in errors[0], output
    assert "wrong user or password" in errors[0] and "not-the-password" not in output


def test_a_node_with_a_certificate_of_another_ca_refuses_to_start(secure_etcd: EtcdProcess, pki: EtcdPki,
                                                                  tmp_path: Path) -> None:
    cluster, _ = cluster_with_user(secure_etcd, pki, tmp_path)
    code, output = _refused_start(cluster, tmp_path, **{"etcd.ssl.keystore.location": str(pki.other_pem)})
    assert code == 2, output
    errors = error_lines(output)
    assert len(errors) == 1 and "cluster.etcd_refused" in errors[0], output
    assert "refused this node's TLS client certificate" in errors[0]


def test_a_node_that_does_not_trust_etcds_certificate_refuses_to_start(secure_etcd: EtcdProcess, pki: EtcdPki,
                                                                       tmp_path: Path) -> None:
    cluster, _ = cluster_with_user(secure_etcd, pki, tmp_path)
    code, output = _refused_start(cluster, tmp_path, **{"etcd.ssl.truststore.location": str(pki.other_ca)})
    assert code == 2, output
    errors = error_lines(output)
    assert len(errors) == 1 and "etcd's certificate is not trusted" in errors[0], output


def test_a_node_whose_role_lacks_its_prefix_refuses_to_start(secure_etcd: EtcdProcess, pki: EtcdPki,
                                                             tmp_path: Path) -> None:
    cluster, _ = cluster_with_user(secure_etcd, pki, tmp_path)
    code, output = _refused_start(cluster, tmp_path, **{"etcd.prefix": "/elsewhere"})
    assert code == 2, output
    errors = error_lines(output)
    assert len(errors) == 1 and "may not read and write /elsewhere/" in errors[0], output


def test_a_certificate_with_a_common_name_is_refused_by_the_gateway_with_the_remedy(
        secure_etcd: EtcdProcess, pki: EtcdPki, tmp_path: Path) -> None:
    cluster, _ = cluster_with_user(secure_etcd, pki, tmp_path)
    code, output = _refused_start(cluster, tmp_path, **{"etcd.ssl.keystore.location": str(pki.with_cn_pem)})
    assert code == 2, output
    errors = error_lines(output)
    assert len(errors) == 1 and "without a CN" in errors[0], output


def test_a_token_etcd_no_longer_accepts_is_renewed(secure_etcd: EtcdProcess, pki: EtcdPki, tmp_path: Path) -> None:
    """etcd drops a user's tokens when the user's password is set (here to the same one, as a rotation
    that starts by re-setting it would); refused its token ("invalid auth token"), the client
    authenticates again and its request goes through. (Expiry, the other cause, is in the unit tests:
    tests/unit/cluster/test_etcd_auth.py.)"""
    cluster, password = cluster_with_user(secure_etcd, pki, tmp_path)
    prefix = f"/kcoord/{cluster.cluster_id}/"
    values = BrokerConfig.load(overrides=[
        f"etcd.endpoints={secure_etcd.endpoint}", f"cluster.id={cluster.cluster_id}",
        *(f"{k}={v}" for k, v in node_overrides(pki, f"kcoord-{cluster.cluster_id}", password).items())],
        environ={}).values
    client: EtcdClient = etcd_client(values)

    async def put(value: str) -> list[bytes]:
        await client.put(prefix + "a", value)
        kvs, _ = await client.get_prefix(prefix)
        return [kv.value for kv in kvs]

    assert trio.run(put, "1") == [b"1"]
    assert client.authentications == 1
    secure_etcd.etcdctl("user", "passwd", f"kcoord-{cluster.cluster_id}", "--interactive=false", stdin=password + "\n")
    assert trio.run(put, "2") == [b"2"]
    assert client.authentications == 2
