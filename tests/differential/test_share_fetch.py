"""ShareFetch and ShareAcknowledge (KIP-932) against Apache Kafka 4.4 and kcoord: share sessions
and their epochs, the records acquired and their delivery counts, acknowledgements (accept,
release, reject) and their errors. The record bytes are not compared (the acquired offsets are);
the member first joins its share group and is assigned the partition."""

from __future__ import annotations

import pytest

from tests.differential.consumer_ops import create_topics, member_id
from tests.differential.data_ops import produce
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import batch
from tests.differential.share_ops import (
    ACCEPT,
    REJECT,
    RELEASE,
    Session,
    heartbeat,
    until_assigned,
    wait_started,
)
from tests.integration.helpers.clients import set_group_configs

pytestmark = pytest.mark.differential

def test_fetch_acknowledge_and_session_errors(pair: Pair) -> None:
    group, topic = unique("share-fetch"), unique("share-fetch-t")

    def scenario(t: Target) -> object:
        c = t.client("share-consumer")
        create_topics(c, {topic: 1})
        mid = member_id(group)
        joined = heartbeat(c, group, mid, 0, [topic])
        until_assigned(c, group, mid, joined["member_epoch"])  # type: ignore[arg-type]
        from tests.differential.consumer_ops import topic_names

        topic_id = next(i for i, n in topic_names(c).items() if n == topic)
        s = Session(c, group, mid, topic_id)
        # Epoch 0 opens the session. The share partition starts at the partition's end when it is
        # first fetched (share.auto.offset.reset=latest): a record produced earlier is not delivered.
        produce(c, topic, 0, batch(b"early"))
        opened = s.fetch()
        # Kafka loads the share partition (and so fixes its start) in the background: give it time.
        # (Before the first acknowledgement Kafka describes the start offset as -1, kcoord as the
        # start: not compared, see docs/differential.md.)
        wait_started(c, group, topic, 3.0)
        produce(c, topic, 0, batch(b"a", b"b", b"c"))
        acquired = s.until_acquired()  # offsets 1-3
        mixed = s.acknowledge([(1, 3, [ACCEPT, RELEASE, REJECT])])
        again = s.acknowledge([(1, 1, [ACCEPT])])
        redelivered = s.until_acquired()
        done = s.fetch([(2, 2, [ACCEPT])])
        return {
            "no_session": s.fetch(epoch=5, member=member_id("stranger")),
            # Whether Kafka lists the partition in its first, empty answer depends on whether the
            # share partition has finished loading: only the error code is compared.
            "opened": opened.error_code,
            "acquired": acquired,
            "mixed": mixed,
            "again": again,
            "redelivered": redelivered,
            "done": done,
            "wrong_epoch": s.fetch(epoch=s.epoch + 7),
            "closed": s.fetch(epoch=-1),
        }

    answers = pair.compare(scenario, extra_dropped=frozenset({"records", "node_endpoints"}))
    acquired = answers["acquired"]["responses"][0]["partitions"][0]["acquired_records"]  # type: ignore[index]
    assert acquired == [{"first_offset": 1, "last_offset": 3, "delivery_count": 1}]


@pytest.mark.parametrize("enabled", [True, False], ids=["renew enabled", "renew disabled"])
def test_renew_acknowledgements_and_the_group_config_that_refuses_them(pair: Pair, enabled: bool) -> None:
    """ShareAcknowledge v2 with ``is_renew_ack`` renewing a record's lock, in a group whose
    ``share.renew.acknowledge.enable`` is as given: taken, or refused with INVALID_RECORD_STATE
    (and the record still acquired: accepting it afterwards works)."""
    from protocol.messages.share_acknowledge import ShareAcknowledgeRequest
    from tests.differential.consumer_ops import topic_names

    group, topic = unique("share-renew"), unique("share-renew-t")
    renew = 4

    def scenario(t: Target) -> object:
        c = t.client("share-consumer")
        create_topics(c, {topic: 1})
        set_group_configs(f"127.0.0.1:{t.port}", group, {"share.renew.acknowledge.enable": str(enabled).lower()})
        mid = member_id(group)
        joined = heartbeat(c, group, mid, 0, [topic])
        until_assigned(c, group, mid, joined["member_epoch"])  # type: ignore[arg-type]
        topic_id = next(i for i, n in topic_names(c).items() if n == topic)
        s = Session(c, group, mid, topic_id)
        s.fetch()
        wait_started(c, group, topic, 3.0)
        produce(c, topic, 0, batch(b"a"))
        s.until_acquired()
        P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
        renewed = c.call(79, 2, ShareAcknowledgeRequest(
            group_id=group, member_id=mid, share_session_epoch=s.epoch, is_renew_ack=True,
            topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[P(
                partition_index=0, acknowledgement_batches=[P.AcknowledgementBatch(
                    first_offset=0, last_offset=0, acknowledge_types=[renew])])])]))
        if renewed.error_code == 0:
            s.epoch += 1
        return {"renewed": renewed, "accepted": s.acknowledge([(0, 0, [ACCEPT])])}

    answers = pair.compare(scenario, extra_dropped=frozenset({"node_endpoints", "acquisition_lock_timeout_ms"}))
    code = answers["renewed"]["responses"][0]["partitions"][0]["error_code"]  # type: ignore[index]
    assert code == (0 if enabled else 121)  # INVALID_RECORD_STATE
