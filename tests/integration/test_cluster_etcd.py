"""The etcd client and the ownership loop against a real etcd: leases, the create-if-absent claim,
two nodes sharing the partitions, and a node that stops renewing fencing itself."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
import trio

from broker.cluster.etcd import EtcdClient, EtcdError
from broker.cluster.node import ClusterNode
from testkit.etcd import EtcdProcess

pytestmark = pytest.mark.trio


async def test_leases_keys_and_the_claim_transaction(etcd: EtcdProcess) -> None:
    client = EtcdClient(etcd.endpoint)
    prefix = f"/test/{uuid.uuid4().hex}"
    lease = await client.grant(5)
    assert await client.keepalive(lease) > 0
    first = await client.create_if_absent(f"{prefix}/owner", "a", lease)
    assert first is not None
    assert await client.create_if_absent(f"{prefix}/owner", "b", lease) is None
    kvs, _ = await client.get_prefix(prefix + "/")
    assert [(kv.key, kv.value, kv.create_revision, kv.lease) for kv in kvs] == [(f"{prefix}/owner", b"a", first, lease)]
    assert not await client.delete_if_revision(f"{prefix}/owner", first + 1000)
    await client.revoke(lease)
    assert await client.keepalive(lease) == 0
    kvs, _ = await client.get_prefix(prefix + "/")
    assert kvs == []  # the key went with the lease


async def test_an_unreachable_endpoint_is_skipped(etcd: EtcdProcess) -> None:
    client = EtcdClient(f"http://127.0.0.1:1,{etcd.endpoint}")
    lease = await client.grant(5)
    assert lease > 0
    await client.revoke(lease)


async def test_an_endpoint_that_resets_the_connection_mid_answer_is_an_etcd_error(etcd: EtcdProcess) -> None:
    """etcd restarting resets connections mid-answer: the node must see an EtcdError (and retry),
    not an exception that ends it."""
    import socket
    import struct

    async def reset_after_request(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.send_all(b"HTTP/1.1 200 OK\r\n")
        stream.socket.close()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, reset_after_request, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        with pytest.raises(EtcdError):
            await EtcdClient(f"http://127.0.0.1:{port}").grant(5)
        lease = await EtcdClient(f"http://127.0.0.1:{port},{etcd.endpoint}").grant(5)
        assert lease > 0
        nursery.cancel_scope.cancel()


class Recorder:
    def __init__(self) -> None:
        self.gained: dict[tuple[str, int], int] = {}
        self.lost: list[tuple[str, int]] = []

    def on_gain(self, partition: tuple[str, int], epoch: int) -> None:
        self.gained[partition] = epoch

    async def on_release(self, partition: tuple[str, int]) -> None:
        self.gained.pop(partition, None)

    def on_lose(self, partition: tuple[str, int]) -> None:
        self.gained.pop(partition, None)
        self.lost.append(partition)


async def test_two_nodes_share_partitions_and_a_silent_one_fences_itself(etcd: EtcdProcess) -> None:
    prefix = f"/test/{uuid.uuid4().hex}"
    partitions = [("__consumer_offsets", p) for p in range(10)]
    now = [0.0]
    nodes = [ClusterNode(EtcdClient(etcd.endpoint), prefix, n, "127.0.0.1", 9000 + n, 3000, lambda: partitions,
                         clock=(lambda: now[0]) if n == 2 else trio.current_time) for n in (1, 2)]
    recorders = [Recorder(), Recorder()]
    for node, recorder in zip(nodes, recorders):
        node.listener = recorder
    async with trio.open_nursery() as nursery:
        for node in nodes:
            await nursery.start(node.run)
        with trio.fail_after(10):
            while len(recorders[0].gained) != 5 or len(recorders[1].gained) != 5:
                await trio.sleep(0.05)
        assert set(recorders[0].gained).isdisjoint(recorders[1].gained)
        assert len(recorders[0].gained) == len(recorders[1].gained) == 5
        owned_by_two = set(recorders[1].gained)
        assert all(nodes[1].owns(p) for p in owned_by_two)
        # Node 2 loses etcd and its clock jumps past the fencing margin (as after a pause): it stops
        # owning at once, before etcd could give its partitions to anyone.
        nodes[1].client = EtcdClient("http://127.0.0.1:1")
        now[0] += 2.5
        assert not nodes[1].may_write()
        assert not any(nodes[1].owns(p) for p in owned_by_two)
        with trio.fail_after(10):
            while set(recorders[1].lost) != owned_by_two:
                await trio.sleep(0.05)
        # Once its lease expires, node 1 takes everything, at epochs above the old ones.
        with trio.fail_after(15):
            while len(recorders[0].gained) < 10:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()


async def test_a_node_restarted_within_its_lease_takes_its_partitions_back_at_once(etcd: EtcdProcess) -> None:
    prefix = f"/test/{uuid.uuid4().hex}"
    partitions = [("__consumer_offsets", p) for p in range(6)]

    def node() -> tuple[ClusterNode, Recorder]:
        n = ClusterNode(EtcdClient(etcd.endpoint), prefix, 1, "127.0.0.1", 9001, 30000, lambda: partitions)
        n.listener = recorder = Recorder()
        return n, recorder

    first, first_seen = node()
    async with trio.open_nursery() as nursery:
        await nursery.start(first.run)
        with trio.fail_after(10):
            while len(first_seen.gained) < 6:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()  # dies without a word: its 30 s lease and keys stay behind
    old_epochs = dict(first_seen.gained)
    second, second_seen = node()
    async with trio.open_nursery() as nursery:
        await nursery.start(second.run)
        with trio.fail_after(5):  # far below the lease
            while len(second_seen.gained) < 6:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert all(second_seen.gained[p] > old_epochs[p] for p in partitions)
    await second.client.revoke(second.lease)
    await first.client.revoke(first.lease)
