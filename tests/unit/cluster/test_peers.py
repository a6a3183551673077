"""Requests between the nodes of a cluster: the client id that proves a node, the transactional
producer read from a batch header, and KIP-890 checks asked of another node keeping a
connection's Produce requests in order."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from broker.cluster.peers import PeerSecret
from broker.coordinators.transaction.service.verification import RemoteVerification, transactional_producer
from protocol.errors import ErrorCode
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from protocol.record_batch import build_simple_batch


def test_only_a_client_id_made_with_the_secret_is_a_node() -> None:
    secret = PeerSecret()
    assert not secret.is_peer("kcoord-node-1/whatever")  # no secret loaded: nobody
    secret.secret = b"s" * 32
    good = secret.client_id(3)
    assert good.startswith("kcoord-node-3/")
    assert secret.is_peer(good)
    assert not secret.is_peer(good.replace("node-3", "node-4"))
    assert not secret.is_peer(good[:-1] + ("0" if good[-1] != "0" else "1"))
    assert not secret.is_peer("rdkafka")
    assert not secret.is_peer(None)
    other = PeerSecret()
    other.secret = b"t" * 32
    assert not other.is_peer(good)


def test_the_transactional_producer_of_a_batch() -> None:
    entries = [(b"k", b"v", 0)]
    txn = build_simple_batch(entries, producer_id=42, producer_epoch=3, transactional=True)
    assert transactional_producer(txn) == (42, 3)
    assert transactional_producer(build_simple_batch(entries, producer_id=42, producer_epoch=3)) is None
    assert transactional_producer(build_simple_batch(entries)) is None
    assert transactional_producer(None) is None
    assert transactional_producer(b"\0" * 10) is None


class FakePeers:
    def __init__(self) -> None:
        self.sent: list[tuple[int, Any, Any]] = []

    def send(self, node: int, api_key: int, version: int, body: Any, on_answer: Any) -> None:
        self.sent.append((node, body, on_answer))


def _verification(peers: FakePeers) -> RemoteVerification:
    topic = SimpleNamespace(name="out")
    state = SimpleNamespace(txns=SimpleNamespace(ongoing=set()))
    topic_logs: Any = SimpleNamespace(catalog=SimpleNamespace(get=lambda name: topic if name == "out" else None,
                                                              by_id={}),
                                      get=lambda name, index: state)
    service: Any = SimpleNamespace(partition_for=lambda txn_id: 7)
    cluster: Any = SimpleNamespace(owns=lambda key: False, owner_of=lambda key: (2, 100))
    fake_peers: Any = peers
    return RemoteVerification(service, cluster, fake_peers, topic_logs, lambda body: None)


def _produce(txn_id: str | None, transactional: bool, partition: int = 0) -> Any:
    raw = build_simple_batch([(b"k", b"v", 0)], producer_id=5, producer_epoch=1, transactional=transactional)
    return SimpleNamespace(transactional_id=txn_id, topic_data=[SimpleNamespace(
        name="out", topic_id=b"", partition_data=[SimpleNamespace(index=partition, records=raw)])])


def _answer(code: int, partition: int = 0) -> AddPartitionsToTxnResponse:
    R = AddPartitionsToTxnResponse.Result
    return AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[R(transactional_id="t", topic_results=[
        R.TopicResult(name="out", results_by_partition=[
            R.TopicResult.PartitionResult(partition_index=partition, partition_error_code=code)])])])


def test_a_connections_requests_wait_behind_one_whose_check_is_out() -> None:
    peers = FakePeers()
    v = _verification(peers)
    served: list[tuple[str, int | None]] = []

    def proceed(name: str) -> Any:
        return lambda verify: served.append((name, None if verify is None else verify("out", 0, 5, 1)))

    v.submit(1, _produce("t", True), proceed("first"))
    assert served == [] and len(peers.sent) == 1
    node, body, answer = peers.sent[0]
    assert node == 2
    assert [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only) for t in body.transactions] == \
        [("t", 5, 1, True)]
    v.submit(1, _produce("t", False), proceed("second"))  # nothing to check, but behind the first
    v.submit(9, _produce(None, False), proceed("other connection"))
    assert served == [("other connection", None)]
    answer(_answer(ErrorCode.NONE))
    assert served == [("other connection", None), ("first", 0), ("second", None)]
    assert v.queues == {}


def test_a_check_that_gets_no_answer_is_retriable() -> None:
    peers = FakePeers()
    v = _verification(peers)
    served: list[int] = []
    v.submit(1, _produce("t", True), lambda verify: served.append(verify("out", 0, 5, 1)))
    peers.sent[0][2](None)
    assert served == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    v.submit(1, _produce("t", True), lambda verify: served.append(verify("out", 0, 5, 1)))
    peers.sent[1][2](_answer(ErrorCode.INVALID_TXN_STATE))
    assert served[-1] == ErrorCode.INVALID_TXN_STATE
