"""A blocking admin client over the wire protocol, for `kcoord groups`: it works against kcoord and
against any Kafka broker, so it asks each broker which versions it speaks (ApiVersions), finds
group coordinators (FindCoordinator) and partition leaders (Metadata) and sends each request to
the node that owns what it asks about, as Kafka's admin client does."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kclient.wire_client import WireClient
from protocol.errors import DecodeError, ErrorCode
from protocol.messages import REQUESTS, ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_delete import OffsetDeleteRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.payloads.consumer_protocol import decode_assignment
from protocol.record_batch import decode_records, iter_batches

TopicPartition = tuple[str, int]
LATEST, EARLIEST = -1, -2

# Versions above these address topics by id (OffsetFetch/OffsetCommit v10), which this client
# does not need: it names topics.
_CEILING: dict[int, int] = {ApiKey.OffsetFetch: 9, ApiKey.OffsetCommit: 9}
_FETCH_BY_NAME = 4


def first_record_time(records: bytes, offset: int) -> int | None:
    """The timestamp of the first data record at or after ``offset`` in fetched record batches."""
    for batch in iter_batches(records, allow_partial=True):
        if batch.is_control or batch.next_offset <= offset:
            continue
        for record in decode_records(batch):
            if batch.base_offset + record.offset_delta >= offset:
                return batch.max_timestamp if batch.log_append_time else batch.base_timestamp + record.timestamp_delta
    return None


class AdminError(Exception):
    """A request the broker refused: carries Kafka's error name, as the admin client reports it."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.name = error_name(code)
        super().__init__(f"{self.name}: {message}" if message else self.name)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


@dataclass
class Node:
    node_id: int
    host: str
    port: int


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]
    # A streams group member's tasks ("<subtopology>_<partition>") by kind: active, standby, warmup.
    tasks: dict[str, list[str]] = field(default_factory=dict)
    process_id: str = ""
    # A streams group member's epoch of the topology it runs (older than the group's: STALE_TOPOLOGY).
    topology_epoch: int | None = None


@dataclass
class Subtopology:
    """One subtopology of a streams group's configured topology, as StreamsGroupDescribe tells it."""

    subtopology_id: str
    source_topics: list[str]
    repartition_sources: list[str]
    repartition_sinks: list[str]
    changelogs: list[str]


@dataclass
class StreamsTopology:
    """A streams group's epochs and topology: ``subtopologies`` None while the topology is not
    configured (its source topics missing, or internal topics missing or mis-partitioned)."""

    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None  # None: no member has sent a topology yet
    subtopologies: list[Subtopology] | None


@dataclass
class GroupDescription:
    group_id: str
    state: str  # Kafka's spelling: Stable, Empty, Dead, PreparingRebalance, Assigning, ...
    group_type: str  # "Classic", "Consumer", "Streams" or "Share", as Kafka's GroupType prints
    assignor: str
    coordinator: Node
    members: list[Member] = field(default_factory=list)
    streams: StreamsTopology | None = None  # a streams group's topology and epochs


def _consumer_assignment(raw: bytes | None) -> list[TopicPartition]:
    """A classic member's assignment as the consumer protocol encodes it; none when it is empty or
    not in that encoding (a client of the "consumer" protocol type is free to send its own bytes):
    the member is still described, without partitions."""
    if not raw:
        return []
    try:
        assigned = decode_assignment(raw).assigned_partitions
    except DecodeError:
        return []
    return [(tp.topic, p) for tp in assigned for p in tp.partitions]


@dataclass
class TopicInfo:
    name: str
    partitions: int
    internal: bool
    # Partition -> the node leading it (-1 while it has no leader).
    leaders: dict[int, int] = field(default_factory=dict)


@dataclass
class GroupListing:
    group_id: str
    state: str
    group_type: str


class KafkaAdmin:
    def __init__(self, bootstrap: str, timeout: float = 5.0, client_id: str = "kcoord-groups") -> None:
        self.timeout = timeout
        self.client_id = client_id
        self._conns: dict[int, WireClient] = {}
        self._versions: dict[int, dict[int, int]] = {}
        self.nodes: dict[int, Node] = {}
        self._bootstrap = self._connect_bootstrap(bootstrap)
        self._refresh_nodes()

    # ---- connections -------------------------------------------------------------------------

    def _connect_bootstrap(self, bootstrap: str) -> WireClient:
        errors = []
        for server in bootstrap.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                client = WireClient(host.strip("[]") or "127.0.0.1", int(port), self.client_id, self.timeout)
            except (OSError, ValueError) as exc:
                errors.append(f"{server}: {exc}")
                continue
            self._versions[-1] = self._api_versions(client)
            return client
        raise ConnectionError("no bootstrap server answered: " + "; ".join(errors))

    def _api_versions(self, client: WireClient) -> dict[int, int]:
        response = client.call(ApiKey.ApiVersions, 0, ApiVersionsRequest())
        if response.error_code:
            raise AdminError(response.error_code, "ApiVersions")
        return {k.api_key: k.max_version for k in response.api_keys}

    def refresh_nodes(self) -> None:
        """Reads the cluster's nodes again: a long-lived client follows nodes joining and leaving."""
        self._refresh_nodes()

    def _refresh_nodes(self) -> None:
        metadata = self.call(-1, ApiKey.Metadata, lambda v: MetadataRequest(topics=[], allow_auto_topic_creation=False))
        self.nodes = {b.node_id: Node(b.node_id, b.host, b.port) for b in metadata.brokers}

    def _conn(self, node_id: int) -> WireClient:
        if node_id == -1:
            return self._bootstrap
        conn = self._conns.get(node_id)
        if conn is None:
            node = self.nodes[node_id]
            conn = WireClient(node.host, node.port, self.client_id, self.timeout)
            self._versions[node_id] = self._api_versions(conn)
            self._conns[node_id] = conn
        return conn

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._bootstrap.close()

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def supports(self, node_id: int, api_key: int) -> bool:
        self._conn(node_id)
        return api_key in self._versions[node_id]

    def version(self, node_id: int, api_key: int) -> int:
        self._conn(node_id)
        theirs = self._versions[node_id].get(api_key)
        if theirs is None:
            raise AdminError(ErrorCode.UNSUPPORTED_VERSION, f"the broker does not serve API {api_key}")
        return min(theirs, REQUESTS[api_key].valid.high, _CEILING.get(api_key, 1 << 15))

    def call(self, node_id: int, api_key: int, build: Any) -> Any:
        """Sends ``build(version)`` to a node at the highest version both sides speak."""
        conn = self._conn(node_id)
        version = self.version(node_id, api_key)
        return conn.call(api_key, version, build(version))

    # ---- routing -----------------------------------------------------------------------------

    def coordinator(self, group_id: str) -> Node:
        def build(v: int) -> Any:
            if v >= 4:
                return FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id])
            return FindCoordinatorRequest(key=group_id, key_type=0)

        response = self.call(-1, ApiKey.FindCoordinator, build)
        if response.coordinators:
            found = response.coordinators[0]
            code, message, node = found.error_code, found.error_message, Node(found.node_id, found.host, found.port)
        else:
            code, message = response.error_code, response.error_message
            node = Node(response.node_id, response.host, response.port)
        if code:
            raise AdminError(code, message)
        self.nodes.setdefault(node.node_id, node)
        return node

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Partition numbers of each topic; a topic that does not exist raises its error."""
        names = sorted(set(topics))
        if not names:
            return {}
        metadata = self.call(-1, ApiKey.Metadata, lambda v: MetadataRequest(
            topics=[MetadataRequest.Topic(name=n) for n in names], allow_auto_topic_creation=False))
        out = {}
        for t in metadata.topics:
            if t.error_code:
                raise AdminError(t.error_code, f"topic {t.name}")
            out[t.name] = sorted(p.partition_index for p in t.partitions)
        return out

    def topics(self) -> list[TopicInfo]:
        """Every topic the broker lists (Metadata for all topics), with its partitions' leaders."""
        metadata = self.call(-1, ApiKey.Metadata, lambda v: MetadataRequest(
            topics=None, allow_auto_topic_creation=False))
        for b in metadata.brokers:
            self.nodes.setdefault(b.node_id, Node(b.node_id, b.host, b.port))
        return sorted((TopicInfo(t.name, len(t.partitions), bool(t.is_internal),
                                 {p.partition_index: p.leader_id for p in t.partitions})
                       for t in metadata.topics if not t.error_code and t.name), key=lambda t: t.name)

    def _leaders(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        wanted = sorted(set(partitions))
        topics = sorted({t for t, _ in wanted})
        metadata = self.call(-1, ApiKey.Metadata, lambda v: MetadataRequest(
            topics=[MetadataRequest.Topic(name=n) for n in topics], allow_auto_topic_creation=False))
        for b in metadata.brokers:
            self.nodes.setdefault(b.node_id, Node(b.node_id, b.host, b.port))
        leader = {(t.name, p.partition_index): p.leader_id for t in metadata.topics for p in t.partitions
                  if not p.error_code}
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            if tp in leader and leader[tp] >= 0:
                by_node.setdefault(leader[tp], []).append(tp)
        return by_node

    # ---- groups ------------------------------------------------------------------------------

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None) -> list[GroupListing]:
        """Consumer groups (protocol type "consumer" or none) and streams groups of every broker,
        as Kafka's listGroups gathers them; share groups too when ``types`` names them."""
        wanted = {t.lower() for t in types or []}
        out: dict[str, GroupListing] = {}
        for node_id in sorted(self.nodes):
            def build(v: int) -> Any:
                return ListGroupsRequest(states_filter=list(states or []) if v >= 4 else [],
                                         types_filter=list(types or []) if v >= 5 else [])

            response = self.call(node_id, ApiKey.ListGroups, build)
            if response.error_code:
                raise AdminError(response.error_code, "ListGroups")
            for g in response.groups:
                # Share groups only when asked for by type (Kafka's tool lists consumer groups).
                if g.protocol_type not in ("consumer", "", "streams") and not (g.protocol_type == "share"
                                                                                and "share" in wanted):
                    continue
                listing = GroupListing(g.group_id, g.group_state or "Unknown",
                                       (g.group_type or "Unknown").capitalize())
                out[g.group_id] = listing
        return list(out.values())

    def describe_group(self, group_id: str) -> GroupDescription:
        """ConsumerGroupDescribe first (a KIP-848 consumer group), DescribeGroups when the group is
        a classic one or the broker predates KIP-848: the order Kafka 4's admin client uses."""
        node = self.coordinator(group_id)
        if self.supports(node.node_id, ApiKey.ConsumerGroupDescribe):
            response = self.call(node.node_id, ApiKey.ConsumerGroupDescribe,
                                 lambda v: ConsumerGroupDescribeRequest(group_ids=[group_id]))
            g = response.groups[0]
            if g.error_code == 0:
                members = [Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                                  [(tp.topic_name, p) for tp in (m.assignment.topic_partitions if m.assignment else [])
                                   for p in tp.partitions])
                           for m in g.members]
                return GroupDescription(group_id, g.group_state, "Consumer", g.assignor_name, node, members)
            if g.error_code not in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
                raise AdminError(g.error_code, g.error_message)
            share = self.describe_share_group(group_id, node)
            if share is not None:
                return share
        if self.supports(node.node_id, ApiKey.StreamsGroupDescribe):
            streams = self._describe_streams_group(group_id, node)
            if streams is not None:
                return streams
        response = self.call(node.node_id, ApiKey.DescribeGroups, lambda v: DescribeGroupsRequest(groups=[group_id]))
        d = response.groups[0]
        if d.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return GroupDescription(group_id, "Dead", "Classic", "", node)
        if d.error_code:
            raise AdminError(d.error_code, d.error_message)
        if d.protocol_type not in ("consumer", ""):
            raise AdminError(ErrorCode.INVALID_GROUP_ID,
                             f"GroupId {group_id} is not a consumer group ({d.protocol_type}).")
        members = []
        for m in d.members:
            members.append(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  _consumer_assignment(m.member_assignment)))
        return GroupDescription(group_id, d.group_state, "Classic", d.protocol_data, node, members)

    def describe_share_group(self, group_id: str, node: Node | None = None) -> GroupDescription | None:
        """ShareGroupDescribe (KIP-932): the share group, or None when the broker has no share
        group of that id (or serves no share groups)."""
        node = node or self.coordinator(group_id)
        if not self.supports(node.node_id, ApiKey.ShareGroupDescribe):
            return None
        response = self.call(node.node_id, ApiKey.ShareGroupDescribe,
                             lambda v: ShareGroupDescribeRequest(group_ids=[group_id],
                                                                 include_authorized_operations=False))
        g = response.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if g.error_code:
            raise AdminError(g.error_code, g.error_message)
        members = [Member(m.member_id, None, m.client_id, m.client_host,
                          [(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions])
                   for m in g.members]
        return GroupDescription(group_id, g.group_state, "Share", g.assignor_name, node, members)

    def share_offsets(self, group_id: str) -> dict[TopicPartition, tuple[int, int]]:
        """DescribeShareGroupOffsets: each share partition's start offset and lag (the records
        from the start offset on not yet acknowledged or archived; -1 where the broker does not
        say, DescribeShareGroupOffsets v0)."""
        node = self.coordinator(group_id)
        response = self.call(node.node_id, ApiKey.DescribeShareGroupOffsets, lambda v: DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequest.Group(group_id=group_id, topics=None)]))
        group = response.groups[0]
        if group.error_code:
            raise AdminError(group.error_code, group.error_message)
        out: dict[TopicPartition, tuple[int, int]] = {}
        for t in group.topics:
            for p in t.partitions:
                if p.error_code:
                    raise AdminError(p.error_code, p.error_message)
                out[(t.topic_name, p.partition_index)] = (p.start_offset, p.lag)
        return out

    def _describe_streams_group(self, group_id: str, node: Node) -> GroupDescription | None:
        """A streams group (KIP-1071), or None when the group is not one. Each member's
        assignment is the partitions its active tasks read: task s_p reads partition p of
        subtopology s's source and repartition topics."""
        response: StreamsGroupDescribeResponse = self.call(
            node.node_id, ApiKey.StreamsGroupDescribe, lambda v: StreamsGroupDescribeRequest(group_ids=[group_id]))
        g = response.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if g.error_code:
            raise AdminError(g.error_code, g.error_message)
        reads: dict[str, list[str]] = {}
        for s in (g.topology.subtopologies or []) if g.topology is not None else []:
            reads[s.subtopology_id] = [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
        members = []
        for m in g.members:
            a = m.assignment
            kinds = {"active": a.active_tasks, "standby": a.standby_tasks, "warmup": a.warmup_tasks} if a else {}
            tasks = {k: [f"{t.subtopology_id}_{p}" for t in ids for p in sorted(t.partitions)]
                     for k, ids in kinds.items()}
            partitions = sorted({(topic, p) for t in (a.active_tasks if a else []) for p in t.partitions
                                 for topic in reads.get(t.subtopology_id, [])})
            members.append(Member(m.member_id, m.instance_id, m.client_id, m.client_host, partitions, tasks,
                                  m.process_id, m.topology_epoch))
        subtopologies = None if g.topology is None or g.topology.subtopologies is None else [
            Subtopology(s.subtopology_id, list(s.source_topics), [t.name for t in s.repartition_source_topics],
                        list(s.repartition_sink_topics), [t.name for t in s.state_changelog_topics])
            for s in g.topology.subtopologies]
        streams = StreamsTopology(g.group_epoch, g.assignment_epoch, None if g.topology is None else g.topology.epoch,
                                  subtopologies)
        return GroupDescription(group_id, g.group_state, "Streams", "sticky", node, members, streams)

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (OffsetFetch for all topics)."""
        node = self.coordinator(group_id)

        def build(v: int) -> Any:
            if v >= 8:
                return OffsetFetchRequest(groups=[OffsetFetchRequest.Group(group_id=group_id, topics=None)])
            return OffsetFetchRequest(group_id=group_id, topics=None)

        response = self.call(node.node_id, ApiKey.OffsetFetch, build)
        if response.groups:
            group = response.groups[0]
            code = group.error_code
            rows = [(t.name, p) for t in group.topics for p in t.partitions]
        else:
            code = response.error_code
            rows = [(t.name, p) for t in response.topics for p in t.partitions]
        if code:
            raise AdminError(code, f"OffsetFetch of group {group_id}")
        out = {}
        for topic, p in rows:
            if p.error_code:
                raise AdminError(p.error_code, f"OffsetFetch of {topic}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(topic, p.partition_index)] = p.committed_offset
        return out

    def alter_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Commits ``offsets`` as an admin (no generation, no member id); per-partition error codes."""
        node = self.coordinator(group_id)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        topics = [OffsetCommitRequest.Topic(name=t, partitions=[
            OffsetCommitRequest.Topic.Partition(partition_index=p, committed_offset=o, committed_metadata="")
            for p, o in parts]) for t, parts in by_topic.items()]
        response = self.call(node.node_id, ApiKey.OffsetCommit, lambda v: OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="", topics=topics))
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out = {}
        for group_id in group_ids:
            node = self.coordinator(group_id)
            response = self.call(node.node_id, ApiKey.DeleteGroups,
                                 lambda v, g=group_id: DeleteGroupsRequest(groups_names=[g]))
            out[group_id] = response.results[0].error_code
        return out

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        node = self.coordinator(group_id)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        response = self.call(node.node_id, ApiKey.OffsetDelete, lambda v: OffsetDeleteRequest(
            group_id=group_id, topics=[OffsetDeleteRequest.Topic(name=t, partitions=[
                OffsetDeleteRequest.Topic.Partition(partition_index=p) for p in ps]) for t, ps in by_topic.items()]))
        return response.error_code, {(t.name, p.partition_index): p.error_code
                                     for t in response.topics for p in t.partitions}

    # ---- log offsets -------------------------------------------------------------------------

    def record_times(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The timestamp (ms) of the first data record at or after each offset, read with Fetch at
        each partition's leader: how old the first record a group has not consumed is. Partitions
        with no record there yet (or without a leader) are left out."""
        out: dict[TopicPartition, int] = {}
        for node_id, tps in self._leaders(offsets).items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[
                FetchRequest.Topic(topic=t, partitions=[FetchRequest.Topic.Partition(
                    partition=p, fetch_offset=offsets[(t, p)], partition_max_bytes=16 << 10) for p in ps])
                for t, ps in by_topic.items()])
            # Version 4 names topics (13 and later address them by id); enough for one record's time.
            response = self._conn(node_id).call(ApiKey.Fetch, _FETCH_BY_NAME, request)
            for t in response.responses:
                for p in t.partitions:
                    if p.error_code:
                        continue
                    at = first_record_time(p.records or b"", offsets[(t.topic, p.partition_index)])
                    if at is not None:
                        out[(t.topic, p.partition_index)] = at
        return out

    def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader: ``LATEST``, ``EARLIEST`` or a timestamp (ms);
        -1 where no record is at or after the timestamp. Partitions without a leader are left out."""
        out: dict[TopicPartition, int] = {}
        for node_id, tps in self._leaders(partitions).items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            topics = [ListOffsetsRequest.Topic(name=t, partitions=[
                ListOffsetsRequest.Topic.Partition(partition_index=p, timestamp=timestamp, max_num_offsets=1)
                for p in ps]) for t, ps in by_topic.items()]
            response = self.call(node_id, ApiKey.ListOffsets, lambda v, ts=topics: ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=ts))
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        continue
                    offset = p.offset if self.version(node_id, ApiKey.ListOffsets) >= 1 else (
                        p.old_style_offsets[0] if p.old_style_offsets else -1)
                    out[(t.name, p.partition_index)] = offset
        return out
