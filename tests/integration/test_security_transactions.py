"""Authorization of the transaction APIs, as Kafka's KafkaApis makes it: a transactional producer
needs Write on its transactional id (and Write on the topics it writes, Read on the group whose
offsets it commits); describing and listing transactions shows only the ids the principal may
describe."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.list_transactions import ListTransactionsRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.integration.helpers.security import SecureBroker

pytestmark = pytest.mark.timeout(120)
SUFFIX = uuid.uuid4().hex[:6]
TOPIC = f"payments-{SUFFIX}"
GROUP = f"payer-{SUFFIX}"
TXN_PREFIX = f"tx-{SUFFIX}-"
DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _acl(resource: ResourceType, name: str, operation: AclOperation, principal: str = "User:alice",
         pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


SECURE_OVERRIDES = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin", "connection.failed.authentication.delay.ms": "0"}


def prepare_secure(broker: SecureBroker) -> None:
    """Once the module's broker serves: what every test of the module expects to find on it."""
    admin = AdminClient(broker.confluent_conf("SASL_PLAINTEXT", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    for future in admin.create_acls([
        _acl(ResourceType.TOPIC, TOPIC, AclOperation.WRITE), _acl(ResourceType.TOPIC, TOPIC, AclOperation.READ),
        _acl(ResourceType.GROUP, GROUP, AclOperation.READ),
        _acl(ResourceType.TRANSACTIONAL_ID, TXN_PREFIX, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
    ]).values():
        future.result(10)


def _producer(secure: SecureBroker, txn_id: str) -> Producer:
    return Producer({**secure.confluent_conf("SASL_PLAINTEXT", "SCRAM-SHA-512", user="alice"),
                     "transactional.id": txn_id, "transaction.timeout.ms": 60000})


def test_a_transactional_id_without_write_is_refused(secure: SecureBroker) -> None:
    p = _producer(secure, f"other-{SUFFIX}")
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(15)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_producer_allowed_on_its_id_topic_and_group_commits_a_transaction(secure: SecureBroker) -> None:
    p = _producer(secure, TXN_PREFIX + "ok")
    p.init_transactions(30)
    consumer = Consumer({**secure.confluent_conf("SASL_PLAINTEXT", "SCRAM-SHA-512", user="alice"),
                         "group.id": GROUP})
    p.begin_transaction()
    p.produce(TOPIC, b"paid")
    p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 1)], consumer.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    committed = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
    assert committed[0].offset == 1
    consumer.close()

    # The same producer may not commit offsets of a group it cannot read.
    other = Consumer({**secure.confluent_conf("SASL_PLAINTEXT", "SCRAM-SHA-512", user="alice"),
                      "group.id": f"elsewhere-{SUFFIX}"})
    p.begin_transaction()
    with pytest.raises(KafkaException) as refused:
        p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 1)], other.consumer_group_metadata(), 30)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    other.close()


def _call(secure: SecureBroker, api: int, version: int, body: Any) -> Any:
    """As User:ANONYMOUS (the PLAINTEXT listener), who has no ACL at all."""
    with WireClient("127.0.0.1", secure.ports["PLAINTEXT"], timeout=10) as c:
        return c.call(api, version, body)


def test_every_transaction_api_checks_the_transactional_id(secure: SecureBroker) -> None:
    txn = TXN_PREFIX + "ok"
    assert _call(secure, ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=txn, key_type=1)).error_code == DENIED
    assert _call(secure, ApiKey.InitProducerId, 4, InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)).error_code == DENIED
    added = _call(secure, ApiKey.AddPartitionsToTxn, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[AddPartitionsToTxnRequest.Topic(name=TOPIC, partitions=[0])]))
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [DENIED]
    assert _call(secure, ApiKey.AddOffsetsToTxn, 3, AddOffsetsToTxnRequest(
        transactional_id=txn, producer_id=1, producer_epoch=0, group_id=GROUP)).error_code == DENIED
    assert _call(secure, ApiKey.EndTxn, 3, EndTxnRequest(
        transactional_id=txn, producer_id=1, producer_epoch=0, committed=True)).error_code == DENIED
    T = TxnOffsetCommitRequest.Topic
    committed = _call(secure, ApiKey.TxnOffsetCommit, 3, TxnOffsetCommitRequest(
        transactional_id=txn, group_id=GROUP, producer_id=1, producer_epoch=0,
        topics=[T(name=TOPIC, partitions=[T.Partition(partition_index=0, committed_offset=5)])]))
    assert [p.error_code for t in committed.topics for p in t.partitions] == [DENIED]
    described = _call(secure, ApiKey.DescribeTransactions, 0, DescribeTransactionsRequest(transactional_ids=[txn]))
    assert [(s.transactional_id, s.error_code) for s in described.transaction_states] == [(txn, DENIED)]
    listed = _call(secure, ApiKey.ListTransactions, 0, ListTransactionsRequest())
    assert listed.error_code == 0 and listed.transaction_states == []


def test_write_on_the_id_is_not_enough_without_write_on_the_topic(secure: SecureBroker) -> None:
    admin = AdminClient(secure.confluent_conf("SASL_PLAINTEXT", "SCRAM-SHA-512", user="admin"))
    for future in admin.create_acls([
            _acl(ResourceType.TRANSACTIONAL_ID, "anon-txn", AclOperation.WRITE, principal="User:ANONYMOUS")]).values():
        future.result(10)
    pid = _call(secure, ApiKey.InitProducerId, 4, InitProducerIdRequest(
        transactional_id="anon-txn", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert pid.error_code == 0
    added = _call(secure, ApiKey.AddPartitionsToTxn, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="anon-txn", v3_and_below_producer_id=pid.producer_id,
        v3_and_below_producer_epoch=pid.producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.Topic(name=TOPIC, partitions=[0])]))
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    # Its own id it may describe (Write implies Describe); alice's it may not list.
    listed = _call(secure, ApiKey.ListTransactions, 0, ListTransactionsRequest())
    assert [s.transactional_id for s in listed.transaction_states] == ["anon-txn"]
