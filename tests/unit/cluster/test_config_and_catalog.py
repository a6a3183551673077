"""Cluster mode's configuration and the topic catalog the nodes share."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.configs.node_config import BrokerConfig, ConfigError
from broker.topics.catalog import TopicCatalog
from broker.topics.changes import PartitionsAdded, TopicCreated, TopicDeleted


def test_cluster_mode_needs_a_cluster_id_and_single_node_mode_needs_nothing() -> None:
    assert BrokerConfig.load(environ={})["etcd.endpoints"] == ""
    assert BrokerConfig.load(environ={})["broker.session.timeout.ms"] == 9000
    with pytest.raises(ConfigError, match=r"cluster\.id"):
        BrokerConfig.load(overrides=["etcd.endpoints=http://127.0.0.1:2379"], environ={})
    config = BrokerConfig.load(overrides=["etcd.endpoints=http://127.0.0.1:2379", "cluster.id=prod"], environ={})
    assert config["etcd.prefix"] == ""
    with pytest.raises(ConfigError, match=r"broker\.session\.timeout\.ms"):
        BrokerConfig.load(overrides=["broker.session.timeout.ms=100"], environ={})


def test_nodes_sharing_a_catalog_see_each_others_topic_changes(tmp_path: Path) -> None:
    one = TopicCatalog(tmp_path, 50, shared=True)
    two = TopicCatalog(tmp_path, 50, shared=True)
    assert one.get("__consumer_offsets") is not None
    assert two.get("__consumer_offsets").topic_id == one.get("__consumer_offsets").topic_id  # type: ignore[union-attr]
    created = one.create("orders", 3)
    assert two.get("orders") is not None and two.get("orders").topic_id == created.topic_id  # type: ignore[union-attr]
    assert two.changes == [TopicCreated("orders", created.topic_id, 3)]
    two.changes.clear()
    two.grow("orders", 5)
    one.refresh()
    assert one.partition_count("orders") == 5
    assert one.changes == [PartitionsAdded("orders", created.topic_id, 3, 5)]
    one.delete("orders")
    two.refresh()
    assert two.get("orders") is None
    assert two.changes == [TopicDeleted("orders", created.topic_id, 5)]
    # A topic created on both at once: the second sees the first's under the lock and is refused.
    one.create("payments", 1)
    with pytest.raises(Exception, match="already exists"):
        two.create("payments", 1)


def test_a_topic_deleted_elsewhere_and_created_here_again_is_the_new_ones_from_then_on(tmp_path: Path) -> None:
    """Node two deletes a topic; node one, before it has noticed, creates it again. Node one's
    change re-reads the catalog first, so the old topic's deletion is applied and published
    before the new topic's creation: applied after it, it closed the partitions the node had just
    opened for the new topic (they were left with no log serving them)."""
    from broker.cluster.etcd import EtcdClient
    from broker.cluster.node import ClusterNode
    from broker.configs.topic_defs import check_topic_config
    from broker.log_runtime.runtime import LogRuntime
    from broker.topics.admin import TopicAdmin
    from broker.topics.changes import TopicChanges
    from broker.topics.partitions import TopicLogs
    from storage.config import LogConfig

    one = TopicCatalog(tmp_path, 3, shared=True)
    node = ClusterNode(EtcdClient("127.0.0.1:1"), "/k", 1, "127.0.0.1", 9092, 3000, lambda: [])
    runtime = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=10, cleaner_backoff_ms=None,
                         shared=True)
    changes = TopicChanges()
    published: list[object] = []
    changes.subscribe(lambda change, settlement: published.append(change))
    admin = TopicAdmin(one, TopicLogs(runtime, one, max_message_bytes=1 << 20, cluster=node), changes, {},
                       check_topic_config)
    old = admin.create_topic("orders", 2, {})
    TopicCatalog(tmp_path, 3, shared=True).delete("orders")  # node two
    new = admin.create_topic("orders", 2, {})
    assert published == [TopicCreated("orders", old.topic_id, 2), TopicDeleted("orders", old.topic_id, 2),
                         TopicCreated("orders", new.topic_id, 2)]
    assert one.changes == [] and one.get("orders") is new
