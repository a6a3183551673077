"""Records and log directories (DeleteRecords, OffsetForLeaderEpoch, DescribeProducers,
DescribeLogDirs, AlterReplicaLogDirs) against Apache Kafka and kcoord: answers and errors compared
field by field, and what Fetch and ListOffsets show after records are deleted."""

from __future__ import annotations

import pytest

from kclient.wire_client import WireClient
from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages.describe_producers import DescribeProducersRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from tests.differential.data_ops import fetch, produce
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import batch, create_topic, wait_topic

pytestmark = pytest.mark.differential

Config = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
DelTopic = DeleteRecordsRequest.Topic
Leader = OffsetForLeaderEpochRequest.OffsetForLeaderTopic


def delete(c: WireClient, topic: str, partition: int, offset: int, version: int = 2) -> object:
    return c.call(21, version, DeleteRecordsRequest(timeout_ms=30000, topics=[DelTopic(name=topic, partitions=[
        DelTopic.Partition(partition_index=partition, offset=offset)])]))


def earliest(c: WireClient, topic: str, partition: int) -> object:
    return c.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.Topic(name=topic, partitions=[
        ListOffsetsRequest.Topic.Partition(partition_index=partition, timestamp=-2)])]))


def end_offset(c: WireClient, topic: str, partition: int, epoch: int, current: int = -1, version: int = 4) -> object:
    return c.call(23, version, OffsetForLeaderEpochRequest(replica_id=-1, topics=[Leader(topic=topic, partitions=[
        Leader.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])]))


def test_delete_records(pair: Pair) -> None:
    topic, compacted, missing = unique("delrec"), unique("delrec-compact"), unique("delrec-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        c.call(19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[CreateTopicsRequest.CreatableTopic(
            name=compacted, num_partitions=1, replication_factor=1,
            configs=[Config(name="cleanup.policy", value="compact")])]))
        wait_topic(c, compacted, 1)
        produce(c, topic, 0, batch(*(b"v%d" % i for i in range(6))))
        produce(c, topic, 0, batch(*(b"w%d" % i for i in range(4))))
        return {
            "to_4": delete(c, topic, 0, 4),
            "earliest": earliest(c, topic, 0),
            "fetch_below": fetch(c, topic, [0], 2),
            "fetch_at": fetch(c, topic, [0], 4),
            "back": delete(c, topic, 0, 2, version=0),
            "past_hw": delete(c, topic, 0, 11, version=1),
            "negative": delete(c, topic, 0, -7),
            "hw_empty": delete(c, topic, 1, -1),
            "no_partition": delete(c, topic, 5, 0),
            "no_topic": delete(c, missing, 0, 0),
            "compacted": delete(c, compacted, 0, 0),
            "internal": delete(c, "__consumer_offsets", 0, 0),
            "to_hw": delete(c, topic, 0, -1),
            "earliest_after": earliest(c, topic, 0),
            "two": c.call(21, 2, DeleteRecordsRequest(timeout_ms=30000, topics=[
                DelTopic(name=topic, partitions=[DelTopic.Partition(partition_index=0, offset=10),
                                                 DelTopic.Partition(partition_index=1, offset=0)]),
                DelTopic(name=missing, partitions=[DelTopic.Partition(partition_index=0, offset=0)])])),
        }

    answers = pair.compare(scenario)
    assert answers["to_4"]["topics"][0]["partitions"][0]["low_watermark"] == 4  # type: ignore[index]
    assert answers["past_hw"]["topics"][0]["partitions"][0]["error_code"] == 1  # type: ignore[index]


def test_offset_for_leader_epoch(pair: Pair) -> None:
    topic, empty, missing = unique("epochs"), unique("epochs-empty"), unique("epochs-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        create_topic(c, empty, 1)
        produce(c, topic, 0, batch(b"a", b"b", b"c"))
        out = {
            "latest": end_offset(c, topic, 0, 0),
            "current_matches": end_offset(c, topic, 0, 0, current=0),
            "current_newer": end_offset(c, topic, 0, 0, current=3),
            "undefined": end_offset(c, topic, 0, -1),
            "newer_epoch": end_offset(c, topic, 0, 7),
            "empty_partition": end_offset(c, topic, 1, 0),
            "empty_topic": end_offset(c, empty, 0, 0),
            "no_partition": end_offset(c, topic, 9, 0),
            "no_topic": end_offset(c, missing, 0, 0),
            "v2": end_offset(c, topic, 0, 0, version=2),
            "v3": end_offset(c, topic, 0, 0, version=3),
        }
        delete(c, topic, 0, 2)
        out["after_delete"] = end_offset(c, topic, 0, 0)
        return out

    answers = pair.compare(scenario)
    assert answers["latest"]["topics"][0]["partitions"][0]["end_offset"] == 3  # type: ignore[index]
    assert answers["current_newer"]["topics"][0]["partitions"][0]["error_code"] == 75  # type: ignore[index]


def test_describe_producers(pair: Pair) -> None:
    topic, missing = unique("producers"), unique("producers-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        ids = c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
        produce(c, topic, 0, batch(b"a", b"b", producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                                   base_sequence=0))
        produce(c, topic, 0, batch(b"c", b"d", b"e", producer_id=ids.producer_id,
                                   producer_epoch=ids.producer_epoch, base_sequence=2, timestamp=1_700_000_005_000))
        produce(c, topic, 1, batch(b"plain"))
        T = DescribeProducersRequest.TopicRequest
        return c.call(61, 0, DescribeProducersRequest(topics=[
            T(name=topic, partition_indexes=[0, 1, 4]), T(name=missing, partition_indexes=[0]),
            T(name="bad name!", partition_indexes=[0])]))

    answers = pair.compare(scenario)
    active = answers["topics"][1]["partitions"][0]["active_producers"]  # type: ignore[index]
    assert active[0]["last_sequence"] == 4 and active[0]["last_timestamp"] == 1_700_000_005_002


def _log_dir(c: WireClient) -> str:
    answer: DescribeLogDirsResponse = c.call(35, 4, DescribeLogDirsRequest(topics=[]))
    return answer.results[0].log_dir


def test_describe_log_dirs(pair: Pair) -> None:
    topic, missing = unique("logdirs"), unique("logdirs-missing")
    LogTopic = DescribeLogDirsRequest.DescribableLogDirTopic

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 3)
        produce(c, topic, 0, batch(b"x" * 100, b"y" * 50))
        produce(c, topic, 2, batch(b"z"))
        asked = [LogTopic(topic=topic, partitions=[0, 1, 2, 8]), LogTopic(topic=missing, partitions=[0])]
        return [c.call(35, v, DescribeLogDirsRequest(topics=asked)) for v in (1, 2, 3, 4, 5)] + [
            c.call(35, 4, DescribeLogDirsRequest(topics=[]))]

    # Each broker has its own directory on its own volume.
    answers = pair.compare(scenario, extra_dropped=frozenset({"log_dir", "total_bytes", "usable_bytes"}))
    sizes = {p["partition_index"]: p["partition_size"]  # type: ignore[index]
             for p in answers[4]["results"][0]["topics"][0]["partitions"]}  # type: ignore[index]
    assert sizes[1] == 0 and sizes[0] > sizes[2] > 0


def test_alter_replica_log_dirs(pair: Pair) -> None:
    topic, missing = unique("movedir"), unique("movedir-missing")
    Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        here = _log_dir(c)

        def move(path: str, name: str, partitions: list[int], version: int = 2) -> object:
            return c.call(34, version, AlterReplicaLogDirsRequest(dirs=[Dir(path=path, topics=[
                Dir.AlterReplicaLogDirTopic(name=name, partitions=partitions)])]))

        return {"same_dir": move(here, topic, [0, 3]), "same_dir_v1": move(here, topic, [0], 1),
                "unknown_topic": move(here, missing, [0]), "other_dir": move(here + "-elsewhere", topic, [0]),
                "long_name": move(here, "t" * 249, [0])}

    answers = pair.compare(scenario)
    assert answers["other_dir"]["results"][0]["partitions"][0]["error_code"] == 57  # type: ignore[index]


def test_describe_producers_of_transactions(pair: Pair) -> None:
    """A transactional producer with a transaction open on the partition (its first offset shown),
    then once the transaction is committed (the marker's coordinator epoch shown, none open)."""
    from tests.differential.txn_ops import add_partitions, completed, end, init

    topic, txn = unique("producers-txn"), unique("producers-txn-id")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        produce(c, topic, 0, batch(b"before"))
        ids = init(c, txn)
        add_partitions(c, txn, ids.producer_id, ids.producer_epoch, {topic: [0]})
        produce(c, topic, 0, batch(b"t1", b"t2", producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                                   base_sequence=0, transactional=True), transactional_id=txn)
        T = DescribeProducersRequest.TopicRequest

        def described() -> object:
            return c.call(61, 0, DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[0])]))

        open_ = described()
        end(c, txn, ids.producer_id, ids.producer_epoch, True)
        completed(c, txn)
        committed = described()
        # The marker's timestamp (the broker's clock) becomes the producer's latest.
        for topic_ in committed.topics:  # type: ignore[attr-defined]
            for p in topic_.partitions:
                for producer in p.active_producers:
                    producer.last_timestamp = "marker" if producer.last_timestamp > 1_700_000_001_000 else None
        return {"open": open_, "committed": committed}

    answers = pair.compare(scenario)
    (open_,) = answers["open"]["topics"][0]["partitions"][0]["active_producers"]  # type: ignore[index]
    assert open_["current_txn_start_offset"] == 1


def test_delete_records_past_an_open_transaction(pair: Pair) -> None:
    """Records deleted up to the high watermark, past a transaction still open: the last stable
    offset is the new log start, in Fetch and in ListOffsets for read_committed."""
    from tests.differential.txn_ops import add_partitions, init

    topic, txn = unique("delrec-txn"), unique("delrec-txn-id")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        produce(c, topic, 0, batch(b"before"))
        ids = init(c, txn)
        add_partitions(c, txn, ids.producer_id, ids.producer_epoch, {topic: [0]})
        produce(c, topic, 0, batch(b"t1", b"t2", producer_id=ids.producer_id, producer_epoch=ids.producer_epoch,
                                   base_sequence=0, transactional=True), transactional_id=txn)
        produce(c, topic, 0, batch(b"after"))
        committed_end = c.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[
            ListOffsetsRequest.Topic(name=topic, partitions=[
                ListOffsetsRequest.Topic.Partition(partition_index=0, timestamp=-1)])]))
        return {"lso_before": committed_end, "deleted": delete(c, topic, 0, 4),
                "fetched": fetch(c, topic, [0], 4, isolation=1),
                "lso_after": c.call(2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[
                    ListOffsetsRequest.Topic(name=topic, partitions=[
                        ListOffsetsRequest.Topic.Partition(partition_index=0, timestamp=-1)])]))}

    answers = pair.compare(scenario)
    assert answers["lso_before"]["topics"][0]["partitions"][0]["offset"] == 1  # type: ignore[index]
    assert answers["lso_after"]["topics"][0]["partitions"][0]["offset"] == 4  # type: ignore[index]
