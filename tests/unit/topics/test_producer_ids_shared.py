"""Producer ids of a cluster: nodes reserving blocks in one shared file never hand out the same id."""

from __future__ import annotations

from pathlib import Path

from broker.topics.producer_state import PRODUCER_ID_BLOCK, ProducerIdAllocator


def test_nodes_sharing_the_file_hand_out_disjoint_ids(tmp_path: Path) -> None:
    path = tmp_path / "kcoord-producer-ids"
    one, two = ProducerIdAllocator(path, shared=True), ProducerIdAllocator(path, shared=True)
    ids = []
    for _ in range(3):
        ids += [one.next_id() for _ in range(PRODUCER_ID_BLOCK + 1)]
        ids += [two.next_id() for _ in range(PRODUCER_ID_BLOCK // 2)]
    assert len(ids) == len(set(ids))
    # A node started later continues above every block reserved so far.
    three = ProducerIdAllocator(path, shared=True)
    assert three.next_id() > max(ids)
