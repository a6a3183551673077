"""Produce and fetch throughput with 1 KiB messages, confluent-kafka with its default batching.

    python -m bench.dataplane [--messages 300000] [--partitions 4] [--policy sync interval]

For each flush policy: produce (acks=1) then consume everything back, printing MB/s, the broker's
CPU seconds and the client's. Beside them, the ceilings:
* the same producer against a sink that answers Produce without validating or storing anything
  (the framing and codec cost alone, in its own process);
* each side's CPU ceiling: MB divided by the CPU seconds it used (the rate if it had a core to
  itself); the machine has two, shared by the client and the broker;
* the disk: sequential writes of 1 MiB with an fdatasync every 8 MiB.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import trio

from bench.harness import ROOT, Broker
from protocol.frames import frame_response, parse_request_header, peek_header, response_header_flexible
from protocol.messages import REQUESTS
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.init_producer_id import InitProducerIdResponse
from protocol.messages.metadata import MetadataResponse
from protocol.messages.produce import ProduceResponse
from testkit.ports import free_port

MESSAGE = 1024
MB = 1 << 20


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- the trivial sink --------------------------------------------------------------------------

SINK_APIS = {0: (0, 9), 3: (0, 12), 18: (0, 3), 22: (0, 4)}


def sink_answer(frame: bytes, partitions: int, port: int, offsets: dict[tuple[str, int], int]) -> bytes | None:
    api_key, version, corr = peek_header(frame)
    request = REQUESTS[api_key]
    flexible = request.is_flexible(version)
    _header, pos = parse_request_header(frame, flexible)
    body = request.decode(frame[pos:], version)
    flex_header = response_header_flexible(api_key, flexible)
    if api_key == 18:
        out: Any = ApiVersionsResponse(error_code=0, api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in SINK_APIS.items()])
        return frame_response(corr, ApiVersionsResponse.encode(out, version), False)
    if api_key == 3:
        names = [t.name for t in body.topics or []]
        out = MetadataResponse(
            brokers=[MetadataResponse.Broker(node_id=1, host="127.0.0.1", port=port, rack=None)],
            cluster_id="sink", controller_id=1, topics=[MetadataResponse.Topic(
                error_code=0, name=n, topic_id=bytes(16), is_internal=False, topic_authorized_operations=0,
                partitions=[MetadataResponse.Topic.Partition(error_code=0, partition_index=i, leader_id=1,
                                                             leader_epoch=0, replica_nodes=[1], isr_nodes=[1])
                            for i in range(partitions)]) for n in names])
        return frame_response(corr, MetadataResponse.encode(out, version), flex_header)
    if api_key == 22:
        out = InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=1, producer_epoch=0)
        return frame_response(corr, InitProducerIdResponse.encode(out, version), flex_header)
    if body.acks == 0:
        return None
    topics = []
    for td in body.topic_data:
        parts = []
        for pd in td.partition_data:
            tp = (td.name, pd.index)
            base = offsets.get(tp, 0)
            offsets[tp] = base + int.from_bytes(pd.records[57:61], "big")  # records count
            parts.append(ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                index=pd.index, error_code=0, base_offset=base, log_append_time_ms=-1, log_start_offset=0,
                record_errors=[], error_message=None))
        topics.append(ProduceResponse.TopicProduceResponse(name=td.name, partition_responses=parts))
    out = ProduceResponse(responses=topics, throttle_time_ms=0)
    return frame_response(corr, ProduceResponse.encode(out, version), flex_header)


async def sink_connection(stream: trio.SocketStream, partitions: int, port: int) -> None:
    offsets: dict[tuple[str, int], int] = {}
    buf = bytearray()
    async with stream:
        while True:
            data = await stream.receive_some(1 << 18)
            if not data:
                return
            buf += data
            out = []
            while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                size = int.from_bytes(buf[:4], "big")
                answer = sink_answer(bytes(buf[4 : 4 + size]), partitions, port, offsets)
                del buf[: 4 + size]
                if answer is not None:
                    out.append(answer)
            if out:
                await stream.send_all(b"".join(out))


def run_sink(port: int, partitions: int) -> None:
    async def main() -> None:
        await trio.serve_tcp(lambda s: sink_connection(s, partitions, port), port, host="127.0.0.1")

    trio.run(main)


# ---- clients -----------------------------------------------------------------------------------

def produce(bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    """(seconds, client CPU seconds) to produce ``count`` messages with acks=1."""
    from confluent_kafka import Producer

    payload = os.urandom(MESSAGE)
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1})
    p.list_topics(topic, timeout=10)
    cpu0, t0 = self_cpu(), time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.005)
    left = p.flush(120)
    elapsed, cpu = time.perf_counter() - t0, self_cpu() - cpu0
    if left:
        raise RuntimeError(f"{left} messages were not delivered")
    return elapsed, cpu


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> tuple[float, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    cpu0, t0 = self_cpu(), time.perf_counter()
    deadline = t0 + 120
    while got < count and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    elapsed, cpu = time.perf_counter() - t0, self_cpu() - cpu0
    c.close()
    if got < count:
        raise RuntimeError(f"consumed only {got} of {count}")
    return elapsed, cpu


def disk_ceiling(directory: str, total: int = 512 * MB) -> float:
    chunk = os.urandom(MB)
    path = os.path.join(directory, "disk-ceiling")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    try:
        for i in range(total // MB):
            os.write(fd, chunk)
            if i % 8 == 7:
                os.fdatasync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        os.unlink(path)
    return total / MB / (time.perf_counter() - t0)


def line(what: str, mb: float, seconds: float, broker_cpu: float | None, client_cpu: float) -> None:
    rate = mb / seconds
    broker = f"broker CPU {broker_cpu:6.2f}s (ceiling {mb / broker_cpu:7.1f} MB/s)" if broker_cpu else "broker -"
    print(f"{what:<34} {rate:7.1f} MB/s  {seconds:6.2f}s  {broker}  client CPU {client_cpu:6.2f}s "
          f"(ceiling {mb / client_cpu:7.1f} MB/s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--policy", nargs="+", default=["sync", "interval"], choices=["sync", "interval"])
    args = ap.parse_args()
    mb = args.messages * MESSAGE / MB
    print(f"{args.messages} messages of {MESSAGE} B ({mb:.0f} MB), {args.partitions} partitions, "
          f"{os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-") as tmp:
        print(f"{'disk (1 MiB writes, fdatasync/8 MiB)':<34} {disk_ceiling(tmp):7.1f} MB/s", flush=True)

    port = free_port()
    sink = subprocess.Popen([sys.executable, "-m", "bench.dataplane", "--sink", str(port), str(args.partitions)],
                            cwd=ROOT)
    try:
        time.sleep(1.0)
        seconds, cpu = produce(f"127.0.0.1:{port}", "sink", args.messages)
        line("produce -> trivial sink", mb, seconds, None, cpu)
    finally:
        sink.terminate()
        sink.wait(10)

    for policy in args.policy:
        broker = Broker(log_flush_policy=policy, num_partitions=args.partitions)
        try:
            bootstrap = f"127.0.0.1:{broker.port}"
            before = broker.cpu()
            seconds, cpu = produce(bootstrap, "bench", args.messages)
            line(f"produce -> kcoord (flush {policy})", mb, seconds, broker.cpu() - before, cpu)
            before = broker.cpu()
            seconds, cpu = consume(bootstrap, "bench", args.partitions, args.messages)
            line(f"fetch <- kcoord (flush {policy})", mb, seconds, broker.cpu() - before, cpu)
            print(f"{'broker RSS':<34} {broker.rss():7.1f} MB", flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--sink":
        run_sink(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
