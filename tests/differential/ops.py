"""Requests the differential scenarios send, with the versions clients use (each is served by both
brokers): short builders so that a scenario reads as the protocol exchange it is."""

from __future__ import annotations

import time

from kclient.wire_client import WireClient
from protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from protocol.record import Record
from protocol.record_batch import build_batch

# The versions of the classic protocol the Java client and librdkafka send today.
JOIN_V = 9
SYNC_V = 5
HEARTBEAT_V = 4
LEAVE_V = 5
DESCRIBE_V = 5

SESSION_MS = 10000
REBALANCE_MS = 10000


def protocols(*names: str, metadata: bytes = b"meta") -> list[JoinGroupRequest.Protocol]:
    return [JoinGroupRequest.Protocol(name=n, metadata=metadata) for n in names or ("range",)]


def join_request(group: str, member_id: str = "", *, instance: str | None = None,
                 session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS, protocol_type: str = "consumer",
                 names: tuple[str, ...] = ("range",), metadata: bytes = b"meta") -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                            member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                            protocols=protocols(*names, metadata=metadata))


def join(c: WireClient, group: str, member_id: str = "", version: int = JOIN_V, **kw: object) -> JoinGroupResponse:
    return c.call(11, version, join_request(group, member_id, **kw))  # type: ignore[arg-type]


def join_member(c: WireClient, group: str, version: int = JOIN_V, **kw: object) -> JoinGroupResponse:
    """Join as a new dynamic member: the MEMBER_ID_REQUIRED round trip, then the join itself."""
    first = join(c, group, "", version, **kw)
    if first.error_code != 79:
        return first
    return join(c, group, first.member_id, version, **kw)


def sync(c: WireClient, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None,
         *, instance: str | None = None, protocol_type: str | None = "consumer", protocol_name: str | None = "range",
         version: int = SYNC_V) -> SyncGroupResponse:
    return c.call(14, version, SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
        protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[SyncGroupRequest.Assignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()]))


def heartbeat(c: WireClient, group: str, generation: int, member_id: str, *, instance: str | None = None,
              version: int = HEARTBEAT_V) -> HeartbeatResponse:
    return c.call(12, version, HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                                group_instance_id=instance))


def leave(c: WireClient, group: str, *members: tuple[str, str | None], version: int = LEAVE_V) -> LeaveGroupResponse:
    return c.call(13, version, LeaveGroupRequest(
        group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i)
                                 for m, i in members]))


def describe(c: WireClient, *groups: str, version: int = DESCRIBE_V) -> DescribeGroupsResponse:
    return c.call(15, version, DescribeGroupsRequest(groups=list(groups)))


def stable_member(c: WireClient, group: str, assignment: bytes = b"assigned", **kw: object) -> JoinGroupResponse:
    """A group of one member, joined and synced: its JoinGroup answer."""
    joined = join_member(c, group, **kw)
    assert joined.error_code == 0, joined
    synced = sync(c, group, joined.generation_id, joined.member_id, {joined.member_id: assignment},
                  instance=kw.get("instance"))  # type: ignore[arg-type]
    assert synced.error_code == 0, synced
    return joined


def create_topic(c: WireClient, name: str, partitions: int = 1, version: int = 7) -> CreateTopicsResponse:
    # The scenarios' records carry fixed timestamps, long past: without this, time retention (on its
    # own schedule) would delete them in the middle of a test.
    keep = [CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="-1")]
    answer: CreateTopicsResponse = c.call(19, version, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                   configs=keep)],
        timeout_ms=30000))
    assert answer.topics[0].error_code == 0, answer
    wait_topic(c, name, partitions)
    return answer


def wait_topic(c: WireClient, name: str, partitions: int, timeout: float = 60.0) -> MetadataResponse:
    """Until Metadata shows every partition of the topic with a leader (a creation is asynchronous in
    Kafka; waiting for it is setup, not part of any comparison)."""
    deadline = time.monotonic() + timeout
    while True:
        answer: MetadataResponse = c.call(3, 12, MetadataRequest(
            topics=[MetadataRequest.Topic(name=name)], allow_auto_topic_creation=False))
        topic = answer.topics[0]
        if topic.error_code == 0 and len(topic.partitions) == partitions and all(
                p.error_code == 0 and p.leader_id >= 0 for p in topic.partitions):
            # Kafka's Metadata can name the leader a moment before its partition serves requests.
            listed: ListOffsetsResponse = c.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[
                ListOffsetsRequest.Topic(name=name, partitions=[
                    ListOffsetsRequest.Topic.Partition(partition_index=i, timestamp=-1)
                    for i in range(partitions)])]))
            if all(p.error_code == 0 for p in listed.topics[0].partitions):
                return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} not ready: {answer}")
        time.sleep(0.1)


def batch(*values: bytes, timestamp: int = 1_700_000_000_000, step: int = 1, key: bytes | None = None,
          **kw: object) -> bytes:
    """A record batch of these values at consecutive timestamps."""
    records = [Record(i, i * step, key, v, []) for i, v in enumerate(values)]
    return build_batch(records, base_timestamp=timestamp, **kw)  # type: ignore[arg-type]
