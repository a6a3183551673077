"""Topology descriptions of streams groups (KIP-1331: StreamsGroupTopologyDescriptionUpdate,
StreamsGroupHeartbeat's ``topology_description_required``, StreamsGroupDescribe v1) against
Apache Kafka 4.4 and kcoord, both keeping descriptions in memory (Kafka with its
``InMemoryTopologyDescriptionPlugin``): when a member is asked for its description, the update's
errors and messages, and the description described; then a real Kafka Streams 4.4 word count,
whose description (pushed by the Streams client on its own) both describe the same way."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest, StreamsGroupDescribeResponse
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateRequest as Update,
)
from protocol.messages.streams_group_topology_description_update import (
    StreamsGroupTopologyDescriptionUpdateResponse,
)
from testkit.kafka import java_command
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import create_topic
from tests.differential.streams_ops import Member, member_id, until_tasks
from tests.integration.helpers.java import compiled_java

pytestmark = pytest.mark.differential

_Sub = Update.TopologyDescription.TopologyDescriptionSubtopology
_N = _Sub.TopologyDescriptionNode
_G = Update.TopologyDescription.TopologyDescriptionGlobalStore


def description(app: str, source: str) -> Update.TopologyDescription:
    """The word count's (streams_ops.topology), as Kafka Streams describes it; a repeated successor
    and fields that do not belong to a node's type, which both brokers drop."""
    repartition = f"{app}-words-repartition"
    return Update.TopologyDescription(
        subtopologies=[
            _Sub(subtopology_id="0", nodes=[
                _N(name="KSTREAM-SOURCE-0000000000", node_type=1, source_topics=[source],
                   stores=["not-a-source-field"], successors=["KSTREAM-FLATMAPVALUES-0000000001"] * 2),
                _N(name="KSTREAM-FLATMAPVALUES-0000000001", node_type=2, successors=["words-repartition-sink"]),
                _N(name="words-repartition-sink", node_type=3, sink_topic=repartition, source_topics=["x"]),
            ]),
            _Sub(subtopology_id="1", nodes=[
                _N(name="words-repartition-source", node_type=1, source_topics=[repartition],
                   successors=["KSTREAM-AGGREGATE-0000000003"]),
                _N(name="KSTREAM-AGGREGATE-0000000003", node_type=2, stores=["counts", "counts"]),
            ]),
        ],
        global_stores=[_G(source=_G.TopologyDescriptionNode(name="g-source", node_type=1, source_topics=["g"],
                                                            successors=["g-processor"]),
                          processor=_G.TopologyDescriptionNode(name="g-processor", node_type=2,
                                                               stores=["g-store"]))])


def update(t: Target, group: str, member: str, epoch: int, desc: Update.TopologyDescription) -> dict[str, Any]:
    answer: StreamsGroupTopologyDescriptionUpdateResponse = t.client("push").call(
        93, 0, Update(group_id=group, member_id=member, topology_epoch=epoch, topology_description=desc))
    return {"code": answer.error_code, "message": answer.error_message}


def describe_v1(t: Target, group: str, include: bool = True, version: int = 1) -> dict[str, Any]:
    request = StreamsGroupDescribeRequest(group_ids=[group], include_topology_description=include)
    answer: StreamsGroupDescribeResponse = t.client("describe").call(89, version, request)
    g = answer.groups[0]
    if version == 0:
        return {"error_code": g.error_code, "topology_epoch": None if g.topology is None else g.topology.epoch}
    return {"error_code": g.error_code, "topology_epoch": None if g.topology is None else g.topology.epoch,
            "status": g.topology_description_status,
            "description": None if g.topology_description is None else g.topology_description.to_dict()}


def test_a_member_is_asked_for_its_description_and_the_update_is_checked_stored_and_described(pair: Pair) -> None:
    group, source, nowhere = unique("streams-desc"), unique("streams-desc-in"), unique("streams-desc-none")

    def scenario(t: Target) -> object:
        c = t.client("streams")
        create_topic(c, source, 2)
        m = Member(c, group, source, "a")
        out: dict[str, object] = {"joined_asked": m.heartbeat().topology_description_required}
        until_tasks(m)
        out["asked_again"] = m.heartbeat().topology_description_required  # within the back-off
        out["before"] = describe_v1(t, group)
        desc = description(group, source)
        bad_node = Update.TopologyDescription(subtopologies=[_Sub(subtopology_id="0", nodes=[
            _N(name="n", node_type=9)])], global_stores=[])
        bad_store = Update.TopologyDescription(subtopologies=[], global_stores=[_G(
            source=_G.TopologyDescriptionNode(name="s", node_type=3),
            processor=_G.TopologyDescriptionNode(name="p", node_type=2))])
        out["errors"] = {
            "unknown_group": update(t, nowhere, m.mid, 1, desc),
            "unknown_member": update(t, group, member_id("stranger"), 1, desc),
            "empty_member": update(t, group, "", 1, desc),
            "empty_group": update(t, "", m.mid, 1, desc),
            "wrong_epoch": update(t, group, m.mid, 2, desc),
            "unknown_node_type": update(t, group, m.mid, 1, bad_node),
            "global_store_of_a_sink": update(t, group, m.mid, 1, bad_store),
        }
        out["after_errors"] = describe_v1(t, group)
        out["pushed"] = update(t, group, m.mid, 1, desc)
        out["described"] = describe_v1(t, group)
        out["not_asked_for"] = describe_v1(t, group, include=False)
        out["v0"] = describe_v1(t, group, version=0)
        out["asked_after_push"] = m.heartbeat().topology_description_required
        out["pushed_again"] = update(t, group, m.mid, 1, description(group, source + "-other"))
        out["described_again"] = describe_v1(t, group)["description"]["subtopologies"][0]["nodes"][0]
        return out

    answers: Any = pair.compare(scenario)
    assert answers["joined_asked"] is True and answers["asked_again"] is False
    assert answers["before"]["status"] == 1 and answers["described"]["status"] == 3
    assert answers["errors"]["wrong_epoch"]["code"] == 42


def test_the_description_goes_with_the_deleted_group(pair: Pair) -> None:
    """An empty group keeps its description; DeleteGroups deletes it (Kafka has its plugin delete
    it first), and the group made again under the same id has none: its member is asked again."""
    from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse

    group, source = unique("streams-desc-delete"), unique("streams-desc-delete-in")

    def scenario(t: Target) -> object:
        c = t.client("streams")
        create_topic(c, source, 1)
        m = Member(c, group, source, "a")
        until_tasks(m)
        out: dict[str, object] = {"pushed": update(t, group, m.mid, 1, description(group, source))}
        out["left"] = m.heartbeat(epoch=-1).error_code
        out["described_empty"] = describe_v1(t, group)["status"]
        deleted: DeleteGroupsResponse = c.call(42, 2, DeleteGroupsRequest(groups_names=[group]))
        out["deleted"] = [r.error_code for r in deleted.results]
        out["described_deleted"] = describe_v1(t, group)
        again = Member(c, group, source, "b")
        out["asked_again"] = again.heartbeat().topology_description_required
        out["described_again"] = describe_v1(t, group)
        return out

    answers: Any = pair.compare(scenario)
    assert answers["described_empty"] == 3 and answers["deleted"] == [0]
    assert answers["asked_again"] is True and answers["described_again"]["status"] == 1


# ---- a real Kafka Streams 4.4 application ---------------------------------------------------------

@pytest.fixture(scope="module")
def java_classes(kafka_libs: Path) -> Path:
    return compiled_java(kafka_libs)


@pytest.fixture
def streams_apps() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def test_a_kafka_streams_app_pushes_its_description_and_both_describe_it_alike(
        pair: Pair, kafka_libs: Path, java_classes: Path, tmp_path: Path,
        streams_apps: list[subprocess.Popen[bytes]]) -> None:
    app, source, sink = unique("streams-desc-app"), unique("streams-desc-app-in"), unique("streams-desc-app-out")

    def scenario(t: Target) -> object:
        c = t.client("setup")
        create_topic(c, source, 2)
        create_topic(c, sink, 1)
        log = (tmp_path / f"{t.name}.log").open("wb")
        proc = subprocess.Popen(
            java_command(kafka_libs, "StreamsWordCount", f"{t.host}:{t.port}", app, source, sink,
                         str(tmp_path / f"state-{t.name}"), classes=java_classes),
            stdout=subprocess.DEVNULL, stderr=log)
        streams_apps.append(proc)
        described = retry(lambda: describe_v1(t, app), lambda d: d["status"] == 3 or proc.poll() is not None,
                          timeout=90)
        proc.terminate()
        proc.wait(60)
        return described

    answers: Any = pair.compare(scenario)
    assert answers["status"] == 3
    nodes = [n["name"] for s in answers["description"]["subtopologies"] for n in s["nodes"]]
    assert "KSTREAM-SOURCE-0000000000" in nodes
