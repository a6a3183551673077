"""Topology descriptions of streams groups (KIP-1331) in the pure coordinator: when a heartbeat
asks for one, StreamsGroupTopologyDescriptionUpdate's checks and records, StreamsGroupDescribe v1,
a restart and the group's deletion."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from broker.coordinators.group.core.streams_topology_description import (
    AVAILABLE,
    BACKOFF_INITIAL_MS,
    NOT_STORED,
    PROCESSOR,
    SINK,
    SOURCE,
)
from protocol.errors import ErrorCode
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest as Update,
)
from protocol.payloads.offsets_log_records import StreamsGroupMetadataRecord
from tests.unit.coordinators.group.core.harness import Harness
from tests.unit.coordinators.group.core.streams.wordcount import (
    APP,
    CHANGELOG,
    CONFIG,
    REPARTITION,
    beat,
    join,
    send,
    tasks_of,
)

# Sessions outlast the back-offs the tests wait out.
STORING = replace(CONFIG, streams_topology_descriptions=True, streams_session_timeout_ms=24 * 3600 * 1000)
TOPICS = {"input": 2, REPARTITION: 2, CHANGELOG: 2}
_Sub = Update.TopologyDescription.TopologyDescriptionSubtopology
_N = _Sub.TopologyDescriptionNode
_G = Update.TopologyDescription.TopologyDescriptionGlobalStore


def description() -> Update.TopologyDescription:
    """The word count's, as Kafka Streams describes it (with a repeated successor and fields that
    do not belong to the node's type, which the store drops)."""
    return Update.TopologyDescription(
        subtopologies=[
            _Sub(subtopology_id="0", nodes=[
                _N(name="KSTREAM-SOURCE-0000000000", node_type=SOURCE, source_topics=["input", "input"],
                   stores=["junk"], successors=["KSTREAM-FLATMAPVALUES-0000000001"] * 2),
                _N(name="KSTREAM-FLATMAPVALUES-0000000001", node_type=PROCESSOR, source_topics=["junk"],
                   successors=["counts-repartition-sink"]),
                _N(name="counts-repartition-sink", node_type=SINK, sink_topic=REPARTITION),
            ]),
            _Sub(subtopology_id="1", nodes=[
                _N(name="counts-repartition-source", node_type=SOURCE, source_topics=[REPARTITION],
                   successors=["KSTREAM-AGGREGATE-0000000003"]),
                _N(name="KSTREAM-AGGREGATE-0000000003", node_type=PROCESSOR, stores=["counts"]),
            ]),
        ],
        global_stores=[_G(source=_G.TopologyDescriptionNode(name="g-source", node_type=SOURCE,
                                                            source_topics=["globals"], successors=["g-proc"]),
                          processor=_G.TopologyDescriptionNode(name="g-proc", node_type=PROCESSOR,
                                                               stores=["g-store"]))])


def push(h: Harness, member: str = "a", epoch: int = 1, desc: Update.TopologyDescription | None = None,
         group: str = APP) -> Any:
    ctx = h.ctx(0)
    h.op(h.shard.streams_group_topology_description_update(
        Update(group_id=group, member_id=member, topology_epoch=epoch,
               topology_description=description() if desc is None else desc), ctx, h.now))
    return h.response(ctx.token)


def stay(h: Harness, member: str = "a") -> Any:
    m = h.shard.state.streams.groups[APP].members[member]
    return beat(h, member, m.member_epoch, {"active_tasks": tasks_of(m.assigned.active), "standby_tasks": {},
                                            "warmup_tasks": {}})


def metadata_records(h: Harness) -> list[Any]:
    return [r.value for r in h.records() if isinstance(r, StreamsGroupMetadataRecord) and r.value is not None]


def test_without_a_store_nothing_is_asked_for_and_an_update_is_unsupported() -> None:
    h = Harness(CONFIG, topics=TOPICS)
    assert send(h, join("a", "p1")).topology_description_required is False
    assert stay(h).topology_description_required is False
    r = push(h)
    assert (r.error_code, r.error_message) == (
        ErrorCode.UNSUPPORTED_VERSION, "The broker has no streams group topology description plugin configured.")
    described = h.shard.streams_group_describe(APP, True)
    assert (described.topology_description_status, described.topology_description) == (NOT_STORED, None)
    assert h.shard.streams_group_describe(APP).topology_description_status == 0  # not requested


def test_a_member_is_asked_once_per_back_off_and_v0_never() -> None:
    h = Harness(STORING, topics=TOPICS)
    assert send(h, join("a", "p1")).topology_description_required is True
    assert stay(h).topology_description_required is False  # within the first back-off
    h.sleep(BACKOFF_INITIAL_MS - 1000)
    assert stay(h).topology_description_required is False
    h.sleep(1000)
    assert stay(h).topology_description_required is True
    h.sleep(BACKOFF_INITIAL_MS)
    assert stay(h).topology_description_required is False  # the second back-off is twice as long
    h.sleep(BACKOFF_INITIAL_MS)
    assert stay(h).topology_description_required is True
    h.sleep(4 * BACKOFF_INITIAL_MS)
    v0 = h.ctx(0)
    m = h.shard.state.streams.groups[APP].members["a"]
    h.op(h.shard.streams_group_heartbeat(StreamsGroupHeartbeatRequest(
        group_id=APP, member_id="a", member_epoch=m.member_epoch, endpoint_information_epoch=0), v0, h.now))
    assert h.response(v0.token).topology_description_required is False


def test_the_update_checks_group_member_epoch_and_nodes_with_kafkas_errors() -> None:
    h = Harness(STORING, topics=TOPICS)
    send(h, join("a", "p1"))
    cases = [
        (push(h, group="nope"), ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found."),
        (push(h, member="b"), ErrorCode.UNKNOWN_MEMBER_ID, f"Member b is not a member of group {APP}."),
        (push(h, member=""), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        (push(h, epoch=2), ErrorCode.INVALID_REQUEST,
         "Topology epoch 2 does not match the group's current topology epoch 1."),
        (push(h, desc=Update.TopologyDescription(subtopologies=[_Sub(subtopology_id="0", nodes=[
            _N(name="x", node_type=4)])], global_stores=[])),
         ErrorCode.INVALID_REQUEST, "Unknown topology node type: 4"),
        (push(h, desc=Update.TopologyDescription(subtopologies=[], global_stores=[
            _G(source=_G.TopologyDescriptionNode(name="s", node_type=PROCESSOR),
               processor=_G.TopologyDescriptionNode(name="p", node_type=PROCESSOR))])),
         ErrorCode.INVALID_REQUEST, "Global store must be composed of a source and a processor node."),
    ]
    for r, code, message in cases:
        assert (r.error_code, r.error_message) == (code, message)
    assert all(v.stored_description_topology_epoch == -1 for v in metadata_records(h))
    h.shard.state.groups.clear()
    h.join("classic")
    r = push(h, group="classic")
    assert (r.error_code, r.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a streams group.")


def test_a_stored_description_is_described_survives_group_epochs_and_restart_keeps_its_epoch_only() -> None:
    h = Harness(STORING, topics=TOPICS)
    send(h, join("a", "p1"))
    before = len(h.records())
    r = push(h)
    assert (r.error_code, r.error_message) == (0, None)
    # Kafka's two records: the "uncertain" barrier, then the stored epoch.
    written = h.records()[before:]
    assert [type(w) for w in written] == [StreamsGroupMetadataRecord] * 2
    assert [(w.value.stored_description_topology_epoch, w.value.failed_description_topology_epoch)
            for w in written] == [(-2, -1), (1, -1)]
    group = h.shard.state.streams.groups[APP]
    assert all(w.value.epoch == group.group_epoch for w in written)

    described = h.shard.streams_group_describe(APP, True)
    assert described.topology_description_status == AVAILABLE
    got = described.topology_description.to_dict()
    source, flat, sink = got["subtopologies"][0]["nodes"]
    assert source == {"name": "KSTREAM-SOURCE-0000000000", "node_type": SOURCE, "source_topics": ["input"],
                      "sink_topic": None, "stores": [], "successors": ["KSTREAM-FLATMAPVALUES-0000000001"]}
    assert flat["source_topics"] == [] and sink["sink_topic"] == REPARTITION
    assert got["subtopologies"][1]["nodes"][1]["stores"] == ["counts"]
    assert [(g["source"]["name"], g["processor"]["stores"]) for g in got["global_stores"]] == [("g-source",
                                                                                             ["g-store"])]
    assert h.shard.streams_group_describe(APP).topology_description is None  # v0, or not asked

    h.sleep(BACKOFF_INITIAL_MS)
    assert stay(h).topology_description_required is False  # stored at the current epoch
    send(h, join("b", "p2"))  # a new group epoch carries the stored epoch over
    assert metadata_records(h)[-1].stored_description_topology_epoch == 1
    assert h.shard.streams_group_describe(APP, True).topology_description_status == AVAILABLE

    h.restart()
    group = h.shard.state.streams.groups[APP]
    assert group.stored_description_topology_epoch == 1 and group.description is None
    assert h.shard.streams_group_describe(APP, True).topology_description_status == NOT_STORED
    assert stay(h).topology_description_required is False  # Kafka does not ask again for this epoch


def test_a_topology_other_than_the_groups_is_refused_and_a_stale_member_is_not_asked() -> None:
    """Kafka 4.4 cannot update a group's topology: a member joining with a newer topology epoch, or
    with the group's epoch and other subtopologies, is refused (INVALID_REQUEST, Kafka's message);
    one with an older epoch joins, is told STALE_TOPOLOGY and is not asked for its description."""
    h = Harness(STORING, topics=TOPICS)
    send(h, join("a", "p1"))
    push(h)
    newer = join("b", "p2")
    assert newer.topology is not None
    newer.topology.epoch = 2
    refused = send(h, newer)
    assert (refused.error_code, refused.error_message) == (ErrorCode.INVALID_REQUEST,
                                                           "Topology updates are not supported yet.")
    other = join("c", "p3")
    assert other.topology is not None
    other.topology.subtopologies[0].source_topics = ["input", "more-input"]
    assert send(h, other).error_code == ErrorCode.INVALID_REQUEST
    older = join("d", "p4")
    assert older.topology is not None
    older.topology.epoch = 0
    r = send(h, older)
    assert r.error_code == 0 and 0 in [s.status_code for s in r.status] and r.topology_description_required is False
    assert h.shard.state.streams.groups[APP].topology.epoch == 1
    assert h.shard.streams_group_describe(APP, True).topology_description_status == AVAILABLE


def test_the_description_goes_with_the_group() -> None:
    """As Kafka deletes it: the barrier, the stored epoch cleared once the store deleted it, then
    the group's tombstones."""
    h = Harness(STORING, topics=TOPICS)
    send(h, join("a", "p1"))
    push(h)
    assert beat(h, "a", -1).error_code == 0
    before = len(h.records())
    assert h.delete_group(APP) == 0
    written = h.records()[before:]
    assert [(type(r).__name__, r.value and r.value.stored_description_topology_epoch) for r in written[:2]] == [
        ("StreamsGroupMetadataRecord", -2), ("StreamsGroupMetadataRecord", -1)]
    assert all(r.value is None for r in written[2:]) and isinstance(written[-1], StreamsGroupMetadataRecord)
    assert APP not in h.shard.state.streams.groups
    assert send(h, join("a", "p1")).topology_description_required is True
    assert h.shard.streams_group_describe(APP, True).topology_description_status == NOT_STORED
    assert metadata_records(h)[-1].stored_description_topology_epoch == -1


def test_a_classic_group_taking_the_id_over_deletes_the_description_behind_the_barrier() -> None:
    h = Harness(STORING, topics=TOPICS)
    send(h, join("a", "p1"))
    push(h)
    assert beat(h, "a", -1).error_code == 0
    before = len(h.records())
    h.join(APP)
    written = h.records()[before:]
    assert isinstance(written[0], StreamsGroupMetadataRecord)
    assert written[0].value.stored_description_topology_epoch == -2
    assert any(isinstance(r, StreamsGroupMetadataRecord) and r.value is None for r in written[1:])
    assert APP not in h.shard.state.streams.groups and APP in h.shard.state.groups


def test_deleting_a_group_without_a_description_writes_no_more_than_before() -> None:
    h = Harness(STORING, topics=TOPICS)
    send(h, join("a", "p1"))
    assert beat(h, "a", -1).error_code == 0
    before = len(h.records())
    assert h.delete_group(APP) == 0
    assert all(r.value is None for r in h.records()[before:])
