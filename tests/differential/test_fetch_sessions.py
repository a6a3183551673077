"""Incremental fetch sessions (KIP-227) on Kafka and kcoord: one consumer's session followed from
its full fetch through incremental fetches that name only what changed, the errors of a lost or
unknown session, and its close; then a session of topic ids (v13+). Each broker hands out session
ids of its own: the comparison sees which session an answer names (none, the first, another)."""

from __future__ import annotations

from kclient.wire_client import WireClient
from protocol.messages.fetch import FetchRequest, FetchResponse
from tests.differential.data_ops import produce, readable_fetch
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import batch, create_topic

Partition = FetchRequest.Topic.Partition


class Consumer:
    """A fetcher of one topic that keeps its session as the Java client does, sending what it says."""

    def __init__(self, c: WireClient, topic: str, version: int = 12, topic_id: bytes = bytes(16)) -> None:
        self.c, self.topic, self.version, self.topic_id = c, topic, version, topic_id
        self.sessions: list[int] = []

    def fetch(self, session_id: int, epoch: int, partitions: dict[int, int],
              forget: list[int] | None = None, version: int | None = None) -> object:
        """One Fetch: ``partitions`` {partition: fetch offset} to add or update, ``forget`` to drop."""
        version = self.version if version is None else version
        name = self.topic if version < 13 else ""
        topics = [FetchRequest.Topic(topic=name, topic_id=self.topic_id, partitions=[
            Partition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20) for p, o in partitions.items()])]
        forgotten = [FetchRequest.ForgottenTopic(topic=name, topic_id=self.topic_id, partitions=forget)]
        answer: FetchResponse = self.c.call(1, version, FetchRequest(
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
            session_epoch=epoch, topics=topics if partitions else [], forgotten_topics_data=forgotten if forget else []))
        if answer.session_id and answer.session_id not in self.sessions:
            self.sessions.append(answer.session_id)
        shown = readable_fetch(answer)
        assert isinstance(shown, dict)
        shown["session_id"] = "none" if not answer.session_id else f"session-{self.sessions.index(answer.session_id)}"
        return shown


def test_a_session_answers_only_what_changed(pair: Pair) -> None:
    topic = unique("fetch-session")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 3)
        produce(c, topic, 0, batch(b"a", b"b"))
        produce(c, topic, 1, batch(b"c"))
        consumer = Consumer(c, topic)
        seen = [consumer.fetch(0, 0, {0: 0, 1: 0, 2: 0})]  # full: every partition, a new session
        sid = consumer.sessions[0]
        seen.append(consumer.fetch(sid, 1, {0: 2, 1: 1}))  # the consumer moved on: nothing new
        produce(c, topic, 2, batch(b"d"))
        seen.append(consumer.fetch(sid, 2, {}))  # partition 2's record and high watermark
        seen.append(consumer.fetch(sid, 3, {2: 1}, forget=[1]))  # nothing new
        produce(c, topic, 1, batch(b"e"))  # forgotten: not answered
        produce(c, topic, 0, batch(b"f"))
        seen.append(consumer.fetch(sid, 4, {}))  # partition 0 only
        seen.append(consumer.fetch(sid, 4, {}))  # the same epoch again: INVALID_FETCH_SESSION_EPOCH
        seen.append(consumer.fetch(sid, 5, {0: 3, 1: 0}))  # added back: its records from 0
        seen.append(consumer.fetch(sid, 6, {}, version=13))  # FETCH_SESSION_TOPIC_ID_ERROR
        seen.append(consumer.fetch(sid ^ 0x5A5A, 6, {}))  # FETCH_SESSION_ID_NOT_FOUND
        seen.append(consumer.fetch(sid, -1, {0: 3}))  # closes the session, answered in full, no new one
        seen.append(consumer.fetch(sid, 6, {}))  # FETCH_SESSION_ID_NOT_FOUND
        seen.append(consumer.fetch(0, 0, {0: 3}))  # a new session
        seen.append(consumer.fetch(consumer.sessions[-1], 1, {}, forget=[0]))  # all forgotten: no session
        return seen

    answers = pair.compare(scenario)
    assert isinstance(answers, list)
    assert [a["error_code"] for a in answers] == [0, 0, 0, 0, 0, 71, 0, 106, 70, 0, 70, 0, 0]  # type: ignore[index]
    assert [a["session_id"] for a in answers] == [  # type: ignore[index]
        "session-0", "session-0", "session-0", "session-0", "session-0", "none", "session-0", "none", "none",
        "none", "none", "session-1", "none"]
    assert [[p["partition_index"] for t in a["responses"] for p in t["partitions"]]  # type: ignore[index]
            for a in answers[:7]] == [[0, 1, 2], [], [2], [], [0], [], [1]]


def test_a_session_of_topic_ids(pair: Pair) -> None:
    topic = unique("fetch-session-ids")

    def scenario(t: Target) -> object:
        c = t.client()
        topic_id = create_topic(c, topic, 2).topics[0].topic_id
        produce(c, topic, 0, batch(b"a"))
        consumer = Consumer(c, topic, version=16, topic_id=topic_id)
        unknown = Consumer(c, topic, version=16, topic_id=b"\x07" * 16)
        seen = [consumer.fetch(0, 0, {0: 0, 1: 0})]
        sid = consumer.sessions[0]
        seen.append(consumer.fetch(sid, 1, {0: 1}))  # moved on: nothing new
        seen.append(unknown.fetch(sid, 2, {0: 0}))  # an id no topic has, added to the session
        seen.append(consumer.fetch(sid, 3, {}))  # its error again, nothing else new
        seen.append(consumer.fetch(sid, 4, {}, version=12))  # FETCH_SESSION_TOPIC_ID_ERROR
        seen.append(unknown.fetch(sid, 4, {}, forget=[0]))  # forgotten by id: nothing left to tell
        produce(c, topic, 1, batch(b"b"))
        seen.append(consumer.fetch(sid, 5, {}))
        return seen

    answers = pair.compare(scenario)
    assert isinstance(answers, list)
    assert [[(p["partition_index"], p["error_code"]) for t in a["responses"]  # type: ignore[index]
             for p in t["partitions"]] for a in answers] == [
        [(0, 0), (1, 0)], [], [(0, 100)], [(0, 100)], [], [], [(1, 0)]]
