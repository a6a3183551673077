"""Topology descriptions of streams groups (KIP-1331), as Kafka 4.4's group coordinator keeps them
with a topology description plugin configured (``group.streams.topology.description.plugin.class``):

- a heartbeat (v1) of a member whose group's current topology epoch has no description stored,
  none refused for good, and no STALE_TOPOLOGY status, answers ``topology_description_required``;
  asking again at the same epoch waits out a back-off (30 s, doubled on each ask, at most 1 h);
- StreamsGroupTopologyDescriptionUpdate checks the group, the member and that the epoch is the
  group's current one, writes the "uncertain" barrier (stored epoch -2) to the group's metadata
  record, stores the description, then writes the stored epoch: the two records Kafka writes;
- StreamsGroupDescribe v1 shows the description when the stored epoch is the topology's and the
  store still holds it (AVAILABLE), else NOT_STORED;
- deleting an empty group (DeleteGroups, or a classic group taking its id over) writes the barrier
  and, for DeleteGroups, the stored epoch cleared, before the group's tombstones.

The store is Kafka's reference ``InMemoryTopologyDescriptionPlugin``'s: the group's memory (soft
state, gone after a restart, while the epochs in the records stay, so a restarted broker describes
NOT_STORED and does not ask again for that epoch, as Kafka with that plugin does). Deleting the
group deletes its description with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from broker.coordinators.group.core.base.context import RequestContext
from broker.coordinators.group.core.base.result import Result
from broker.coordinators.group.core.streams import records as rec
from broker.coordinators.group.core.streams.model import Description, Node, StreamsGroup
from broker.coordinators.group.core.streams.topology import STALE_TOPOLOGY
from protocol.errors import ErrorCode
from protocol.messages.streams_group_describe import StreamsGroupDescribeResponse
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest,
    StreamsGroupTopologyDescriptionUpdateResponse,
)
from protocol.payloads.offsets_log_records import StreamsGroupMetadataRecord

if TYPE_CHECKING:
    from broker.coordinators.group.core.state import CoordinatorState

STORED_NONE = -1
STORED_UNCERTAIN = -2

# StreamsGroupDescribe v1's TopologyDescriptionStatus.
NOT_REQUESTED = 0
NOT_STORED = 1
ERROR = 2
AVAILABLE = 3

SOURCE, PROCESSOR, SINK = 1, 2, 3

# Kafka's StreamsGroupTopologyDescriptionBackoff (without its ±20 % jitter).
BACKOFF_INITIAL_MS = 30_000
BACKOFF_MAX_MS = 3_600_000
BACKOFF_MULTIPLIER = 2

NO_STORE = "The broker has no streams group topology description plugin configured."

_Update = StreamsGroupTopologyDescriptionUpdateRequest
_Description = _Update.TopologyDescription
_D = StreamsGroupDescribeResponse.DescribedGroup
_DNodeT = TypeVar("_DNodeT", _D.TopologyDescription.TopologyDescriptionSubtopology.TopologyDescriptionNode,
                  _D.TopologyDescription.TopologyDescriptionGlobalStore.TopologyDescriptionNode)


class DescriptionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def update_response(code: int, message: str | None = None) -> StreamsGroupTopologyDescriptionUpdateResponse:
    return StreamsGroupTopologyDescriptionUpdateResponse(error_code=code, error_message=message)


def current_topology_epoch(group: StreamsGroup) -> int:
    return -1 if group.topology is None else int(group.topology.epoch)


# ---- the heartbeat -----------------------------------------------------------------------------

def _arm_backoff(group: StreamsGroup, epoch: int, now: int) -> bool:
    """Kafka's armIfNotActive: False while a back-off at this epoch runs; else arms the next one."""
    entry = group.description_backoff
    if entry is not None and entry[0] == epoch and now < entry[2]:
        return False
    attempts = entry[1] + 1 if entry is not None and entry[0] == epoch else 0
    delay = min(BACKOFF_INITIAL_MS * BACKOFF_MULTIPLIER ** attempts, BACKOFF_MAX_MS)
    group.description_backoff = (epoch, attempts, now + delay)
    return True


def maybe_require(st: CoordinatorState, group: StreamsGroup | None, ctx: RequestContext, member_epoch: int,
                  response: StreamsGroupHeartbeatResponse, now: int) -> None:
    """Sets ``topology_description_required`` on a successful heartbeat answer when Kafka would
    (its StreamsGroupTopologyDescriptionManager.maybeSetTopologyDescriptionRequired)."""
    if not st.config.streams_topology_descriptions or ctx.api_version < 1 or member_epoch < 0:
        return
    if group is None or response.error_code != ErrorCode.NONE:
        return
    epoch = current_topology_epoch(group)
    if (epoch < 0 or group.stored_description_topology_epoch == epoch
            or group.failed_description_topology_epoch == epoch
            or any(s.status_code == STALE_TOPOLOGY for s in response.status or [])):
        return
    if _arm_backoff(group, epoch, now):
        response.topology_description_required = True


# ---- StreamsGroupTopologyDescriptionUpdate -----------------------------------------------------

class WireNode(Protocol):
    """A node as either message carries it."""

    name: str
    node_type: int
    source_topics: list[str]
    sink_topic: str | None
    stores: list[str]
    successors: list[str]


def _node(node: WireNode) -> Node:
    successors = tuple(dict.fromkeys(node.successors))
    if node.node_type == SOURCE:
        return Node(node.name, SOURCE, source_topics=tuple(dict.fromkeys(node.source_topics)), successors=successors)
    if node.node_type == PROCESSOR:
        return Node(node.name, PROCESSOR, stores=tuple(dict.fromkeys(node.stores)), successors=successors)
    if node.node_type == SINK:
        return Node(node.name, SINK, sink_topic=node.sink_topic, successors=successors)
    raise DescriptionError(ErrorCode.INVALID_REQUEST, f"Unknown topology node type: {node.node_type}")


def normalized(description: _Description) -> Description:
    """The description as the store keeps it, or INVALID_REQUEST for an unknown node type or a
    global store that is not a source and a processor."""
    subtopologies = tuple((s.subtopology_id, tuple(_node(n) for n in s.nodes)) for s in description.subtopologies)
    stores = []
    for g in description.global_stores:
        if g.source is None or g.processor is None:
            raise DescriptionError(ErrorCode.INVALID_REQUEST, "Global store must be composed of a source and a "
                                   "processor node.")
        source, processor = _node(g.source), _node(g.processor)
        if source.node_type != SOURCE or processor.node_type != PROCESSOR:
            raise DescriptionError(ErrorCode.INVALID_REQUEST,
                                   "Global store must be composed of a source and a processor node.")
        stores.append((source, processor))
    return Description(subtopologies, tuple(stores))


def _validated_group(st: CoordinatorState, req: StreamsGroupTopologyDescriptionUpdateRequest) -> StreamsGroup:
    if not st.config.streams_topology_descriptions:
        raise DescriptionError(ErrorCode.UNSUPPORTED_VERSION, NO_STORE)
    if not req.member_id:
        raise DescriptionError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if not req.group_id:
        raise DescriptionError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if req.topology_description is None:
        raise DescriptionError(ErrorCode.INVALID_REQUEST, "TopologyDescription can't be null.")
    gid = req.group_id
    group = st.streams.groups.get(gid)
    if group is None:
        if gid in st.groups or gid in st.consumer_groups or gid in st.share_groups:
            raise DescriptionError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
        raise DescriptionError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
    if req.member_id not in group.members:
        raise DescriptionError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {gid}.")
    epoch = current_topology_epoch(group)
    if req.topology_epoch != epoch:
        raise DescriptionError(ErrorCode.INVALID_REQUEST, f"Topology epoch {req.topology_epoch} does not match "
                               f"the group's current topology epoch {epoch}.")
    return group


def update(st: CoordinatorState, req: StreamsGroupTopologyDescriptionUpdateRequest, ctx: RequestContext,
           now: int) -> Result:
    out = Result()
    try:
        group = _validated_group(st, req)
        assert req.topology_description is not None
        description = normalized(req.topology_description)
    except DescriptionError as exc:
        out.replies.append((ctx.token, update_response(exc.code, exc.message)))
        return out
    pushed = req.topology_epoch
    failed = group.failed_description_topology_epoch
    # The barrier before the store is touched: until the epoch below is durable, "uncertain".
    if group.stored_description_topology_epoch != STORED_UNCERTAIN:
        st.emit(out, rec.description_epochs(group, STORED_UNCERTAIN, failed))
    group.description = (pushed, description)
    stored = group.stored_description_topology_epoch
    st.emit(out, rec.description_epochs(group, STORED_UNCERTAIN if stored == STORED_NONE else max(stored, pushed),
                                        failed))
    if group.description_backoff is not None and group.description_backoff[0] == pushed:
        group.description_backoff = None
    out.replies.append((ctx.token, update_response(ErrorCode.NONE)))
    return out


# ---- the group's deletion -----------------------------------------------------------------------

def before_deletion(st: CoordinatorState, group: StreamsGroup, finalize: bool) -> list[StreamsGroupMetadataRecord]:
    """What Kafka writes before an empty group with a stored description is deleted: the
    "uncertain" barrier, then (DeleteGroups, ``finalize``) the stored epoch cleared once the
    store deleted it. The description goes (the store's delete)."""
    stored = group.stored_description_topology_epoch
    if not st.config.streams_topology_descriptions or group.members or stored == STORED_NONE:
        return []
    failed = group.failed_description_topology_epoch
    records = [] if stored == STORED_UNCERTAIN else [rec.description_epochs(group, STORED_UNCERTAIN, failed)]
    if finalize:
        records.append(rec.description_epochs(group, STORED_NONE, failed))
    group.description = None
    return records


# ---- StreamsGroupDescribe v1 -------------------------------------------------------------------

def _described(cls: type[_DNodeT], node: Node) -> _DNodeT:
    return cls(name=node.name, node_type=node.node_type, source_topics=list(node.source_topics),
               sink_topic=node.sink_topic, stores=list(node.stores), successors=list(node.successors))


def attach(st: CoordinatorState, group: StreamsGroup, described: _D) -> None:
    """Fills a described group's topology description and its status (the client asked for them)."""
    described.topology_description_status = NOT_STORED
    if not st.config.streams_topology_descriptions or described.topology is None:
        return
    epoch = described.topology.epoch
    if group.stored_description_topology_epoch < 0 or group.stored_description_topology_epoch != epoch:
        return
    if group.description is None or group.description[0] != epoch:
        return  # the store no longer has it (a restart)
    kept = group.description[1]
    T = _D.TopologyDescription
    S, G = T.TopologyDescriptionSubtopology, T.TopologyDescriptionGlobalStore
    described.topology_description = T(
        subtopologies=[S(subtopology_id=sid, nodes=[_described(S.TopologyDescriptionNode, n) for n in nodes])
                       for sid, nodes in kept.subtopologies],
        global_stores=[G(source=_described(G.TopologyDescriptionNode, source),
                         processor=_described(G.TopologyDescriptionNode, processor))
                       for source, processor in kept.global_stores])
    described.topology_description_status = AVAILABLE
