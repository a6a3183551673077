"""OffsetFetch v10's answer, built from the shard's rows as Kafka's KafkaApis builds it: each topic
named by its id (a topic without one left out), the ids no topic has following the group's other
topics with UNKNOWN_TOPIC_ID, and a group refused whole answered with its error alone."""

from __future__ import annotations

from broker.handlers.groups import offsets_response
from protocol.codec import decode, encode
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import OffsetFetchResponse

IDS = {"t": b"\x01" * 16, "u": b"\x02" * 16}
UNKNOWN = b"\x09" * 16


def test_topics_by_id_then_the_unknown_ids() -> None:
    rows = [("t", 0, 5, 1, "m", 0), ("t", 1, -1, -1, "", 0), ("gone", 0, 3, -1, "", 0), ("u", 0, 7, -1, "", 0)]
    answer = offsets_response(10, [("g", None)], [("g", 0, rows)], topic_id=IDS.get,
                              unknown_ids={"g": [(UNKNOWN, [0, 4])]})
    got = decode(OffsetFetchResponse, encode(OffsetFetchResponse, answer, 10), 10)
    (group,) = got.groups
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in group.topics] == [
        (IDS["t"], [(0, 5, 0), (1, -1, 0)]),
        (IDS["u"], [(0, 7, 0)]),
        (UNKNOWN, [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID), (4, -1, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]
    unknown = group.topics[-1].partitions[0]
    assert (unknown.committed_leader_epoch, unknown.metadata) == (-1, "")
    # The name stays on the answer for the authorizer (v10 does not carry it).
    assert [t.name for t in answer.groups[0].topics] == ["t", "u", ""]


def test_a_refused_group_answers_its_error_alone() -> None:
    answer = offsets_response(10, [("g", [("t", [0])])], [("g", ErrorCode.STALE_MEMBER_EPOCH, [])],
                              topic_id=IDS.get, unknown_ids={"g": [(UNKNOWN, [0])]})
    assert [(g.error_code, g.topics) for g in answer.groups] == [(ErrorCode.STALE_MEMBER_EPOCH, [])]


def test_v9_keeps_names() -> None:
    answer = offsets_response(9, [("g", None)], [("g", 0, [("t", 0, 5, -1, "", 0)])], topic_id=IDS.get,
                              unknown_ids={"g": [(UNKNOWN, [0])]})
    assert [(t.name, t.topic_id) for t in answer.groups[0].topics] == [("t", bytes(16))]
