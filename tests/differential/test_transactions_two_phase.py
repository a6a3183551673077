"""Two-phase commit participants (KIP-939) against Apache Kafka 4.4 and kcoord, both run with
``transaction.two.phase.commit.enable`` and ``unstable.api.versions.enable`` (InitProducerId v6 is
unstable in Kafka 4.4: advertised only with it) and Kafka's StandardAuthorizer.

Kafka 4.4.0's Java producer takes ``transaction.two.phase.commit.enable`` but sends no Enable2Pc
(its release keeps ``prepareTransaction``, ``completeTransaction`` and ``initTransactions(true)``
internal, and its requests carry neither flag): configured so, it commits, aborts, leaves a
transaction open when it goes away, and a new instance aborts that one, with the same outcomes,
read_committed and read_uncommitted reads and producer epochs on both. A participant as the
protocol has it (InitProducerId v6 with Enable2Pc, Produce v12, EndTxn v5) is then driven over the
wire: its open transaction is described with the timeout Integer.MAX_VALUE (never timed out) until
a new incarnation fences and aborts it.

Then the ACL: Enable2Pc needs TWO_PHASE_COMMIT on the transactional id besides Write, refused
TRANSACTIONAL_ID_AUTHORIZATION_FAILED alike; with it, any timeout is taken and the transaction is
described with Integer.MAX_VALUE; KeepPreparedTxn is UNSUPPORTED_VERSION (Kafka 4.4's coordinator
does not recover a prepared transaction for a new producer yet: it refuses the flag).

This module runs its own Kafka beside the session's: neither property can be set on a running
broker."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_acls import CreateAclsRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from testkit.kafka import SASL_USERS, KafkaProcess, java_command
from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.differential.conftest import KCOORD_SETTINGS
from tests.differential.data_ops import fetch, produce
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import batch, create_topic
from tests.differential.txn_ops import completed, describe
from tests.integration.helpers.java import compiled_java

pytestmark = [pytest.mark.differential, pytest.mark.timeout(600)]

SETTINGS = {
    "transaction.two.phase.commit.enable": "true",
    "unstable.api.versions.enable": "true",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The PLAINTEXT listener (and Kafka's controller) is ANONYMOUS: the Java clients and the set-up.
    "super.users": "User:ANONYMOUS",
}
PREFIX = "two-phase-"
# Kafka's ACL codes: TRANSACTIONAL_ID 5, PREFIXED 4, WRITE 4, TWO_PHASE_COMMIT 15, ALLOW 3.
GRANTS = [("User:alice", 4), ("User:bob", 4), ("User:bob", 15)]
DENIED = 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
UNSUPPORTED_VERSION = 35
PRODUCE_V = 12  # a producer of transactions version 2: the partition added by the broker


@pytest.fixture(scope="module")
def brokers(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pair, Pair]]:
    """The PLAINTEXT pair and the SASL_PLAINTEXT pair (the same two brokers)."""
    work = tmp_path_factory.mktemp("two-phase")
    kafka = KafkaProcess(kafka_libs, work / "kafka", dict(SETTINGS), sasl_users=SASL_USERS)
    (work / "kcoord").mkdir()
    kcoord = BrokerProcess(work / "kcoord" / "data", {**KCOORD_SETTINGS, **SETTINGS})
    kcoord_sasl = free_port()
    kcoord.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kcoord.port},SASL_PLAINTEXT://127.0.0.1:{kcoord_sasl}",
        "advertised.listeners": "",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in SASL_USERS.items()),
    })
    try:
        kafka.start()
        kcoord.start()
        kcoord.wait_loaded()
        assert kafka.sasl_port is not None
        plain = Pair(Target("kafka", kafka.port), Target("kcoord", kcoord.port))
        sasl = Pair(Target("kafka", kafka.sasl_port), Target("kcoord", kcoord_sasl))
        for target in (plain.kafka, plain.kcoord):
            with WireClient(target.host, target.port, timeout=20.0) as c:
                creations = [CreateAclsRequest.AclCreation(
                    resource_type=5, resource_name=PREFIX, resource_pattern_type=4, principal=who, host="*",
                    operation=operation, permission_type=3) for who, operation in GRANTS]
                answer = c.call(ApiKey.CreateAcls, 3, CreateAclsRequest(creations=creations))
                assert [r.error_code for r in answer.results] == [0] * len(GRANTS), answer
        yield plain, sasl
    finally:
        kcoord.kill()
        kafka.stop()


def test_both_advertise_init_producer_id_v6_with_unstable_versions_on(brokers: tuple[Pair, Pair]) -> None:
    plain, _sasl = brokers
    for target in (plain.kafka, plain.kcoord):
        with WireClient(target.host, target.port) as c:
            answer = c.call(18, 3, ApiVersionsRequest(client_software_name="differential",
                                                      client_software_version="1"))
        assert [(a.min_version, a.max_version) for a in answer.api_keys if a.api_key == ApiKey.InitProducerId] == \
            [(0, 6)], target.name


def test_a_java_participant_commits_aborts_and_leaves_a_transaction_a_new_instance_aborts(
        brokers: tuple[Pair, Pair], kafka_libs: Path) -> None:
    plain, _sasl = brokers
    classes = compiled_java(kafka_libs)
    topic, txn = unique("two-phase-t"), unique(PREFIX + "java")

    def run(target: Target) -> dict[str, str]:
        with WireClient(target.host, target.port, timeout=20.0) as c:
            create_topic(c, topic, 1)
        done = subprocess.run(java_command(kafka_libs, "TwoPhaseCommit", f"{target.host}:{target.port}", topic, txn,
                                           classes=classes), capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, f"{target.name}: exit {done.returncode}\n{done.stdout}\n{done.stderr[-4000:]}"
        # The client's own warnings share stdout: the program's lines are marked.
        steps = [line.split(" ", 2) for line in done.stdout.splitlines() if line.startswith("STEP ")]
        return {step[1]: step[2] for step in steps}

    theirs, ours = run(plain.kafka), run(plain.kcoord)
    assert ours == theirs
    # The released producer asks for no two-phase commit: its own timeout (60 s by default).
    assert theirs["described_reinit"] == "Empty/60000/0"
    assert theirs["described_end"] == "CompleteCommit/60000/0"
    # One epoch up per transaction ended (transactions version 2), the left one's abort and the new
    # instance's InitProducerId: the last marker at epoch 5.
    assert theirs["producers_end"].startswith("[5/"), theirs["producers_end"]
    assert theirs["read_committed"] == "[committed-1, committed-2, next-1]"
    assert theirs["read_uncommitted"] == "[committed-1, committed-2, aborted-1, left-prepared, next-1]"


def test_a_participants_open_transaction_stays_open_until_a_new_incarnation_aborts_it(
        brokers: tuple[Pair, Pair]) -> None:
    plain, _sasl = brokers
    topic, txn = unique("two-phase-wire-t"), unique(PREFIX + "wire")

    def scenario(t: Target) -> dict[str, Any]:
        c = t.client()
        create_topic(c, topic, 1)
        first = _init(c, txn)
        pid, epoch = first.producer_id, first.producer_epoch
        out: dict[str, Any] = {"first": first, "produced": produce(
            c, topic, 0, batch(b"prepared", producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True),
            transactional_id=txn, version=PRODUCE_V)}
        out["open"] = describe(c, txn)
        out["read_committed_while_open"] = fetch(c, topic, [0], isolation=1)
        out["new_incarnation"] = _init(c, txn)  # fences the producer and aborts its transaction
        out["aborted"] = completed(c, txn)
        out["new_incarnation_again"] = _init(c, txn)
        out["old_producer_ends"] = c.call(ApiKey.EndTxn, 5, EndTxnRequest(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True))
        out["read_committed"] = fetch(c, topic, [0], isolation=1)
        out["read_uncommitted"] = fetch(c, topic, [0])
        return out

    answers: Any = plain.compare(scenario)
    assert answers["open"]["transaction_states"][0]["transaction_state"] == "Ongoing"
    assert answers["open"]["transaction_states"][0]["transaction_timeout_ms"] == 2_147_483_647
    assert answers["new_incarnation"]["error_code"] == 51  # CONCURRENT_TRANSACTIONS
    assert answers["new_incarnation_again"]["producer_epoch"] == 2


def _login(target: Target, user: str) -> WireClient:
    c = target.client(user)
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{SASL_USERS[user]}".encode())).error_code == 0
    return c


def _init(c: WireClient, txn: str, *, two_phase: bool = True, keep: bool = False,
          timeout_ms: int = 60_000) -> InitProducerIdResponse:
    return c.call(ApiKey.InitProducerId, 6, InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=timeout_ms, enable2_pc=two_phase, keep_prepared_txn=keep))


def test_two_phase_commit_takes_its_own_acl_and_no_timeout(brokers: tuple[Pair, Pair]) -> None:
    _plain, sasl = brokers
    alice_txn, bob_txn = unique(PREFIX + "alice"), unique(PREFIX + "bob")

    def scenario(t: Target) -> dict[str, Any]:
        alice, bob, carol = _login(t, "alice"), _login(t, "bob"), _login(t, "carol")
        # The ACLs reach Kafka's authorizer through its metadata log: wait for them to apply.
        retry(lambda: _init(alice, alice_txn, two_phase=False), lambda r: r.error_code != DENIED)
        retry(lambda: _init(bob, bob_txn), lambda r: r.error_code != DENIED)
        out: dict[str, Any] = {
            "alice without two-phase": _init(alice, alice_txn, two_phase=False),
            "alice with two-phase": _init(alice, alice_txn),
            "carol with two-phase": _init(carol, alice_txn),
            "bob with two-phase, a timeout past the maximum": _init(bob, bob_txn, timeout_ms=3_600_000),
            "bob keeping the prepared transaction": _init(bob, bob_txn, keep=True),
            "bob keeping without two-phase": _init(bob, bob_txn, two_phase=False, keep=True),
            "bob without two-phase, a timeout past the maximum": _init(bob, unique(PREFIX + "bob"),
                                                                       two_phase=False, timeout_ms=3_600_000),
        }
        described = bob.call(ApiKey.DescribeTransactions, 0, DescribeTransactionsRequest(transactional_ids=[bob_txn]))
        out["bob described"] = described
        return out

    theirs: Any = sasl.compare(scenario)
    assert theirs["alice with two-phase"]["error_code"] == DENIED == theirs["carol with two-phase"]["error_code"]
    assert theirs["bob with two-phase, a timeout past the maximum"]["error_code"] == 0
    assert theirs["bob keeping the prepared transaction"]["error_code"] == UNSUPPORTED_VERSION
    assert theirs["bob described"]["transaction_states"][0]["transaction_timeout_ms"] == 2_147_483_647
