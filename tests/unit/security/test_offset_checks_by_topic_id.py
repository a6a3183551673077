"""The ACLs of OffsetCommit and OffsetFetch v10, which name topics by id, as Kafka's KafkaApis
checks them: the id is resolved to its topic first; an id no topic has is answered
UNKNOWN_TOPIC_ID (by the handler, before any topic check), a topic the principal may not read
(commit) or describe (fetch) TOPIC_AUTHORIZATION_FAILED with its id, the others are served."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.handlers.groups import commit_error, offset_fetch_error
from broker.handlers.request_checks import RequestChecks
from broker.network.router import Request
from broker.security.acl_model import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.security.authorizer import Authorizer
from broker.topics.catalog import TopicCatalog
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

ALICE = "User:alice"
UNKNOWN = uuid.uuid4().bytes


class _Reply:
    def __init__(self) -> None:
        self.response: Any = None
        self.amend: Any = None

    def set(self, response: Any) -> None:
        self.response = response


def _acl(resource: int, name: str, operation: int) -> AclBinding:
    return AclBinding(resource, name, PatternType.LITERAL, ALICE, "*", operation, Permission.ALLOW)


@pytest.fixture
def catalog(tmp_path: Path) -> TopicCatalog:
    catalog = TopicCatalog(tmp_path, 1)
    catalog.create("readable", 1)
    catalog.create("hidden", 1)
    return catalog


def _checks(catalog: TopicCatalog, *acls: AclBinding) -> RequestChecks:
    authorizer = Authorizer(None, frozenset(), False)
    authorizer.acls = list(acls)
    return RequestChecks(catalog, authorizer, None)


def _request(body: Any, api_key: int, reply: _Reply, version: int = 10) -> Request[Any]:
    return Request(body, reply, api_key, version, "client", ALICE, "PLAINTEXT", "127.0.0.1", None)  # type: ignore[arg-type]


def _id(catalog: TopicCatalog, name: str) -> bytes:
    topic_id = catalog.topic_id(name)
    assert topic_id is not None
    return topic_id


def test_commit_by_id_checks_read_on_the_topic_the_id_names(catalog: TopicCatalog) -> None:
    checks = _checks(catalog, _acl(ResourceType.GROUP, "g", Operation.READ),
                     _acl(ResourceType.TOPIC, "readable", Operation.READ))
    T, P = OffsetCommitRequest.Topic, OffsetCommitRequest.Topic.Partition
    readable, hidden = _id(catalog, "readable"), _id(catalog, "hidden")
    body = OffsetCommitRequest(group_id="g", topics=[
        T(topic_id=topic_id, partitions=[P(partition_index=0, committed_offset=1)])
        for topic_id in (readable, hidden, UNKNOWN)])
    reply = _Reply()
    req = _request(body, 8, reply)
    assert not checks.offset_commit(req, commit_error)
    # The handler serves the readable topic and the unknown id (UNKNOWN_TOPIC_ID is its answer).
    assert [t.topic_id for t in body.topics] == [readable, UNKNOWN]
    served = OffsetCommitResponse(topics=[OffsetCommitResponse.Topic(topic_id=t.topic_id, partitions=[
        OffsetCommitResponse.Topic.Partition(partition_index=0, error_code=0)]) for t in body.topics])
    answer = reply.amend(served)
    assert [(t.topic_id, t.partitions[0].error_code) for t in answer.topics] == [
        (readable, 0), (UNKNOWN, 0), (hidden, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


def test_commit_by_id_without_read_on_the_group(catalog: TopicCatalog) -> None:
    checks = _checks(catalog, _acl(ResourceType.TOPIC, "readable", Operation.READ))
    T, P = OffsetCommitRequest.Topic, OffsetCommitRequest.Topic.Partition
    body = OffsetCommitRequest(group_id="g", topics=[T(topic_id=UNKNOWN, partitions=[
        P(partition_index=0, committed_offset=1)])])
    reply = _Reply()
    assert checks.offset_commit(_request(body, 8, reply), commit_error)
    assert [(t.topic_id, t.partitions[0].error_code) for t in reply.response.topics] == [
        (UNKNOWN, ErrorCode.GROUP_AUTHORIZATION_FAILED)]


def test_fetch_by_id_checks_describe_on_the_topic_the_id_names(catalog: TopicCatalog) -> None:
    checks = _checks(catalog, _acl(ResourceType.GROUP, "g", Operation.DESCRIBE),
                     _acl(ResourceType.TOPIC, "readable", Operation.DESCRIBE))
    G = OffsetFetchRequest.Group
    readable, hidden = _id(catalog, "readable"), _id(catalog, "hidden")
    body = OffsetFetchRequest(groups=[G(group_id="g", topics=[
        G.Topics(topic_id=topic_id, partition_indexes=[0]) for topic_id in (readable, hidden, UNKNOWN)])])
    reply = _Reply()
    req = _request(body, 9, reply)
    assert not checks.offset_fetch(req, offset_fetch_error)
    assert [t.topic_id for t in body.groups[0].topics] == [readable, UNKNOWN]
    Topics, Partitions = OffsetFetchResponse.Group.Topics, OffsetFetchResponse.Group.Topics.Partitions
    served = OffsetFetchResponse(groups=[OffsetFetchResponse.Group(group_id="g", error_code=0, topics=[
        Topics(name="readable", topic_id=readable, partitions=[Partitions(
            partition_index=0, committed_offset=5, metadata="", error_code=0)])])])
    answer = reply.amend(served)
    denied = answer.groups[0].topics[-1]
    assert denied.topic_id == hidden
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code) for p in denied.partitions] == [
        (-1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


def test_fetch_of_every_topic_by_id_leaves_out_what_the_principal_may_not_describe(catalog: TopicCatalog) -> None:
    checks = _checks(catalog, _acl(ResourceType.GROUP, "g", Operation.DESCRIBE),
                     _acl(ResourceType.TOPIC, "readable", Operation.DESCRIBE))
    body = OffsetFetchRequest(groups=[OffsetFetchRequest.Group(group_id="g", topics=None)])
    reply = _Reply()
    assert not checks.offset_fetch(_request(body, 9, reply), offset_fetch_error)
    Topics = OffsetFetchResponse.Group.Topics
    served = OffsetFetchResponse(groups=[OffsetFetchResponse.Group(group_id="g", error_code=0, topics=[
        Topics(name=name, topic_id=_id(catalog, name), partitions=[]) for name in ("readable", "hidden")])])
    assert [t.topic_id for t in reply.amend(served).groups[0].topics] == [_id(catalog, "readable")]
