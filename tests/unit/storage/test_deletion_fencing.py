"""Deleting a topic's partitions in a cluster: a directory is renamed away and removed only under a
valid claim of its partition, checked right before the rename; a node without one (the fence
revoked, or its lease possibly expired) leaves every file as it was, byte for byte. A topic
created again under the same name is told from the deleted one by its topic id."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from broker.topics.catalog import TopicCatalog
from broker.topics.changes import TopicCreated, TopicDeleted
from storage.checkpoints import read_partition_metadata
from storage.config import LogConfig
from storage.errors import FencedError, LogClosedError
from storage.fencing import REVOKED, Fence
from storage.log_manager import LogManager

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=200, segment_index_bytes=4096)
OLD_ID = b"\x01" * 16
NEW_ID = b"\x02" * 16


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (its path relative to it) with a digest of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def written(manager: LogManager, fence: Fence, topic_id: bytes = OLD_ID, partition: int = 0,
            topic: str = "t") -> None:
    """A partition with a few segments, written and closed by the holder of ``fence``."""
    log = manager.get_or_create(topic, partition, topic_id=topic_id, fence=fence)
    log.begin_epoch(fence.epoch)
    for i in range(60):
        log.append([(b"k%d" % i, b"value-%d" % i + b"x" * 100, 1000 + i)])
    log.close()
    manager.forget(topic, partition)


def lapsed(name: str) -> Fence:
    """A claim whose lease could have expired (nobody revoked it)."""
    return Fence(name, 9, valid=lambda: False)


@pytest.mark.parametrize("fence", [REVOKED, lapsed("t-0")], ids=["revoked", "lease-lapsed"])
def test_a_node_without_a_valid_claim_does_not_delete_the_partition(tmp_path: Path, fence: Fence) -> None:
    owner = LogManager(tmp_path, SMALL, shared=True)
    written(owner, Fence("t-0", 5))
    before = tree(tmp_path)
    other = LogManager(tmp_path, SMALL, shared=True)
    with pytest.raises(FencedError):
        other.delete_partition("t", 0, fence, {OLD_ID})
    assert tree(tmp_path) == before
    assert (tmp_path / "t-0").is_dir() and not list(tmp_path.glob("*-delete"))


def test_a_fence_that_falls_while_the_log_is_open_keeps_its_files(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, SMALL, shared=True)
    fence = Fence("t-0", 5)
    log = manager.get_or_create("t", 0, topic_id=OLD_ID, fence=fence)
    for i in range(60):
        log.append([(b"k", b"v%d" % i, 1000 + i)])
    log.flush()
    before = tree(tmp_path)
    fence.revoke()  # another node owns it now
    with pytest.raises(FencedError):
        manager.delete_partition("t", 0, fence, {OLD_ID})
    assert tree(tmp_path) == before


def test_the_owner_deletes_a_deleted_topics_partition(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, SMALL, shared=True)
    fence = Fence("t-0", 5)
    written(manager, fence)
    log = manager.get_or_create("t", 0, topic_id=OLD_ID, fence=fence)  # still open when deleted
    assert manager.delete_partition("t", 0, fence, {OLD_ID})
    assert not (tmp_path / "t-0").exists() and not list(tmp_path.glob("*-delete"))
    assert manager.get("t", 0) is None
    with pytest.raises(LogClosedError):
        log.append([(b"k", b"late", 1)])
    assert not manager.delete_partition("t", 0, fence, {OLD_ID})  # nothing left: nothing done


def test_only_a_directory_of_a_topic_known_deleted_goes(tmp_path: Path) -> None:
    """A late deletion of the old topic finds the new topic's directory where the old one was; a
    directory of a topic merely unknown (or that records none) is not taken for a deleted one."""
    manager = LogManager(tmp_path, SMALL, shared=True)
    fence = Fence("t-0", 5)
    written(manager, fence, NEW_ID)
    written(manager, Fence("t-1", 5), b"\x03" * 16, partition=1)
    (tmp_path / "t-2").mkdir()
    before = tree(tmp_path)
    assert not manager.delete_partition("t", 0, fence, {OLD_ID})
    assert not manager.delete_partition("t", 1, Fence("t-1", 6), {OLD_ID})
    assert not manager.delete_partition("t", 2, Fence("t-2", 6), {OLD_ID})
    assert tree(tmp_path) == before and (tmp_path / "t-2").is_dir()


def test_a_recreated_topics_owner_replaces_the_deleted_topics_directory(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, SMALL, shared=True)
    written(manager, Fence("t-0", 5))
    before = tree(tmp_path)
    # Without a valid claim nothing is renamed: the open is refused with every file as it was.
    with pytest.raises(FencedError):
        manager.get_or_create("t", 0, topic_id=NEW_ID, fence=lapsed("t-0"), deleted={OLD_ID})
    assert tree(tmp_path) == before
    # A directory of a topic not known to be deleted (the topic id of an internal topic that
    # differs, a data dir from elsewhere) is opened as it is.
    log = manager.get_or_create("t", 0, topic_id=NEW_ID, fence=Fence("t-0", 6), deleted={b"\x09" * 16})
    assert log.end_offset == 60 and read_partition_metadata(tmp_path / "t-0") == OLD_ID
    log.close()
    assert not manager.replaced
    log = manager.get_or_create("t", 0, topic_id=NEW_ID, fence=Fence("t-0", 6), deleted={OLD_ID})
    assert log.end_offset == 0 and log.log_start_offset == 0 and manager.replaced == {("t", 0)}
    assert read_partition_metadata(tmp_path / "t-0") == NEW_ID
    assert not list(tmp_path.glob("*-delete"))
    log.close()
    # The same topic's directory is opened as it is.
    again = manager.get_or_create("t", 0, topic_id=NEW_ID, fence=Fence("t-0", 7), deleted={OLD_ID})
    assert again.end_offset == 0
    again.close()


def test_a_single_broker_deletes_as_before(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, SMALL)
    manager.get_or_create("t", 0, topic_id=OLD_ID).append([(b"k", b"v", 1)])
    assert manager.delete_topic("t") == [0]
    assert not (tmp_path / "t-0").exists()
    # Without a fence (one broker owns everything) a directory is never replaced on open.
    manager.get_or_create("u", 0, topic_id=OLD_ID).append([(b"k", b"v", 1)])
    manager.forget("u", 0)
    assert manager.get_or_create("u", 0, topic_id=NEW_ID).end_offset == 1
    manager.close()


def test_another_nodes_catalog_sees_a_topic_deleted_and_created_again_as_both(tmp_path: Path) -> None:
    one = TopicCatalog(tmp_path, 50, shared=True)
    two = TopicCatalog(tmp_path, 50, shared=True)
    old = one.create("t", 2)
    two.refresh()
    two.changes.clear()
    one.delete("t")
    new = one.create("t", 3)
    two.refresh()
    assert two.changes == [TopicDeleted("t", old.topic_id, 2), TopicCreated("t", new.topic_id, 3)]
    # Both know which topic is gone: its directories may be removed, the new topic's never.
    assert set(two.deleted) == set(one.deleted) == {old.topic_id}
    assert TopicCatalog(tmp_path, 50, shared=True).deleted[old.topic_id].partitions == 2


def test_a_cluster_node_lists_only_unowned_directories_of_deleted_topics_to_claim(tmp_path: Path) -> None:
    from broker.cluster.etcd import EtcdClient
    from broker.cluster.node import ClusterNode, Owner
    from broker.log_runtime.runtime import LogRuntime
    from broker.topics.partitions import TopicLogs

    catalog = TopicCatalog(tmp_path, 3, shared=True)
    node = ClusterNode(EtcdClient("127.0.0.1:1"), "/k", 1, "127.0.0.1", 9092, 3000, lambda: [])
    runtime = LogRuntime(tmp_path, SMALL, sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None, shared=True)
    topic_logs = TopicLogs(runtime, catalog, max_message_bytes=1 << 20, cluster=node)
    gone, live = catalog.create("gone", 3), catalog.create("live", 1)
    for name, partitions, topic_id in (("gone", 3, gone.topic_id), ("live", 1, live.topic_id),
                                       ("stranger", 1, b"\x07" * 16)):
        for p in range(partitions):
            written(runtime.manager, Fence(f"{name}-{p}", 1), topic_id, p, name)
    (tmp_path / "gone-5").mkdir()  # recording no topic id: nobody's to remove
    catalog.delete("gone")
    node.owners[("gone", 1)] = Owner(2, 40)  # its owner is alive: it removes it itself
    assert topic_logs.leftovers() == [("gone", 0), ("gone", 2)]
    # Gone meanwhile, or claimed by someone: no longer listed.
    assert runtime.manager.delete_partition("gone", 0, Fence("gone-0", 2), {gone.topic_id})
    node.owners[("gone", 2)] = Owner(1, 41)
    assert topic_logs.leftovers() == []
    # Its owner died: listed once nobody owns it. The live topic, the unknown one and the one
    # without a topic id were never candidates.
    del node.owners[("gone", 1)], node.owners[("gone", 2)]
    assert topic_logs.leftovers() == [("gone", 1), ("gone", 2)]
    # A topic created again under the name with as many partitions: its owners replace them.
    catalog.create("gone", 3)
    assert topic_logs.leftovers() == []
    runtime.close()


def test_a_directory_replaced_between_the_check_and_the_rename_is_put_back(tmp_path: Path) -> None:
    """The deleting node stops after its last check, for longer than its lease; meanwhile the
    topic is created again and the new owner replaces the old directory with its own. The late
    rename takes the new directory: it is put back at once and nothing of it is removed."""
    old_owner = LogManager(tmp_path, SMALL, shared=True)
    written(old_owner, Fence("t-0", 5))
    new_owner = LogManager(tmp_path, SMALL, shared=True)
    checks = []

    def stalls_after_the_check() -> bool:
        checks.append(1)
        if len(checks) == 2:  # right before the rename: the new owner acts now
            log = new_owner.get_or_create("t", 0, topic_id=NEW_ID, fence=Fence("t-0", 6), deleted={OLD_ID})
            log.append([(b"k", b"new", 1)])
            log.close()
        return True

    with pytest.raises(FencedError):
        old_owner.delete_partition("t", 0, Fence("t-0", 5, valid=stalls_after_the_check), {OLD_ID})
    assert read_partition_metadata(tmp_path / "t-0") == NEW_ID and not list(tmp_path.glob("*-delete"))
    reopened = new_owner.get_or_create("t", 0, topic_id=NEW_ID, fence=Fence("t-0", 7))
    assert reopened.end_offset == 1 and b"new" in reopened.read(0, 1 << 20)
    reopened.close()
