"""What one durable round trip costs on this machine before any broker work, and kcoord beside it.

    python -m bench.durability_floor [--seconds 3] [--rounds 3] [--kcoord] [--baseline DIR]

A minimal trio server answers each request, one in flight from a client in another process, after
(a) nothing, (b) appending 200 bytes to a file and fdatasync-ing it on the event loop, (c) the
same append with the fdatasync on a long-lived worker thread (kcoord's ``SyncThreads``), the event
loop woken to answer when it is done, and (d) the worker thread also writing the answer itself.
(c) is the floor for a durable acknowledgement with the disk wait off the event loop, (d) the
floor when the thread that waited for the disk also answers. fdatasync alone is printed first.

With ``--kcoord`` each round also measures kcoord (this checkout's ``kcoord serve``, durable
default) answering one OffsetCommit of 4 partitions in flight, and with ``--baseline DIR`` the
kcoord of another checkout too. Every server is driven by the same client (``bench.commits``'s
generator, sending the same OffsetCommit frames), the order of the servers rotating from one round
to the next. The last lines are the medians over the rounds and kcoord's p50 and p99 against (c)
and (d).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench import commits
from bench.harness import Broker
from broker.log_runtime.sync_threads import SyncThreads
from testkit.ports import free_port

RECORD = b"x" * 200
REPLY = (8).to_bytes(4, "big") + b"a" * 8
FLOORS = {"none": "(a) round trip, no write", "loop": "(b) fdatasync on the event loop",
          "thread": "(c) fdatasync on a worker thread", "thread-writes": "(d) worker thread syncs and answers"}
COMMITTER: commits.Committer = ("bench-floor", -1, "")


def fdatasync_alone(path: str, count: int = 2000) -> list[float]:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
    took = []
    try:
        for _ in range(count):
            t = time.perf_counter()
            os.write(fd, RECORD)
            os.fdatasync(fd)
            took.append(time.perf_counter() - t)
    finally:
        os.close(fd)
    return took


async def serve(port: int, mode: str, path: str, ready: Any) -> None:
    """Answers every read with one frame: the client has one request in flight."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
    threads = SyncThreads(1, name="floor-sync")

    async def handle(stream: trio.SocketStream) -> None:
        conn = stream.socket.fileno()
        while True:
            await trio.lowlevel.wait_readable(conn)
            if not os.read(conn, 65536):
                return
            if mode == "none":
                os.write(conn, REPLY)
            elif mode == "loop":
                os.write(fd, RECORD)
                os.fdatasync(fd)
                os.write(conn, REPLY)
            elif mode == "thread":
                os.write(fd, RECORD)
                threads.submit([lambda: os.fdatasync(fd)], lambda _results: os.write(conn, REPLY))
            else:
                os.write(fd, RECORD)
                threads.queues[0].put((lambda: (os.fdatasync(fd), os.write(conn, REPLY)), lambda _exc: None))

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    ready.set()
    await trio.serve_listeners(handle, listeners)


def server_process(port: int, mode: str, path: str, ready: Any) -> None:
    trio.run(serve, port, mode, path, ready)


def figures(latencies: list[float], seconds: float) -> dict[str, float]:
    took = sorted(latencies)
    if not took:
        raise RuntimeError("no request was answered")
    return {"p50 ms": statistics.median(took) * 1000, "p99 ms": took[int(len(took) * 0.99)] * 1000,
            "req/s": len(took) / seconds}


def measure_floor(mode: str, tmp: str, seconds: float) -> dict[str, float]:
    ctx = multiprocessing.get_context("fork")
    port = free_port()
    ready = ctx.Event()
    server = ctx.Process(target=server_process, args=(port, mode, f"{tmp}/{mode}", ready), daemon=True)
    server.start()
    try:
        if not ready.wait(30):
            raise RuntimeError(f"the {mode} server did not start")
        # The floor servers answer with placeholder bytes, not OffsetCommit answers.
        _done, latencies, _cpu = commits.generate(port, [COMMITTER], 1, seconds, check=False)
        return figures(latencies, seconds)
    finally:
        server.kill()
        server.join()


def measure_kcoord(root: Path | None, seconds: float) -> dict[str, float]:
    broker = Broker(root=root, log_flush_policy="sync")
    try:
        commits.create_commit_topic(broker.port)
        commits.run_case(broker, [COMMITTER], 1, 1.0)  # warm-up
        r = commits.run_case(broker, [COMMITTER], 1, seconds)
        return {"p50 ms": r["p50 ms"], "p99 ms": r["p99 ms"], "req/s": r["req/s"]}
    finally:
        broker.stop()


def show(name: str, r: dict[str, float]) -> None:
    print(f"{name:44} p50 {r['p50 ms']:.3f} ms  p99 {r['p99 ms']:.3f} ms  {r['req/s']:7,.0f} req/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kcoord", action="store_true", help="also kcoord's one OffsetCommit in flight")
    parser.add_argument("--baseline", type=Path, help="also the kcoord of this checkout")
    args = parser.parse_args()
    names = dict(FLOORS)
    if args.kcoord or args.baseline:
        names["kcoord"] = "kcoord, one OffsetCommit in flight"
    if args.baseline:
        names["baseline"] = f"kcoord of {args.baseline.name}, the same"
    runs: dict[str, list[dict[str, float]]] = {key: [] for key in names}
    with tempfile.TemporaryDirectory(prefix="kcoord-floor-") as tmp:
        took = sorted(fdatasync_alone(f"{tmp}/alone"))
        print(f"{'fdatasync of a 200-byte append, alone':44} p50 {statistics.median(took) * 1000:.3f} ms  "
              f"p99 {took[int(len(took) * 0.99)] * 1000:.3f} ms")
        order = list(names)
        for i in range(args.rounds):
            turn = order[i % len(order):] + order[:i % len(order)]
            for key in turn:
                if key == "kcoord":
                    r = measure_kcoord(None, args.seconds)
                elif key == "baseline":
                    r = measure_kcoord(args.baseline, args.seconds)
                else:
                    r = measure_floor(key, tmp, args.seconds)
                runs[key].append(r)
                show(names[key], r)
    medians = {key: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for key, rs in runs.items()}
    print(f"medians over {args.rounds} round(s):")
    for key, r in medians.items():
        show(names[key], r)
    for key in ("kcoord", "baseline"):
        if key in medians:
            for floor in ("thread", "thread-writes"):
                print(f"{names[key]} / {FLOORS[floor][:3]}: p50 {medians[key]['p50 ms'] / medians[floor]['p50 ms']:.2f}x"
                      f"  p99 {medians[key]['p99 ms'] / medians[floor]['p99 ms']:.2f}x")


if __name__ == "__main__":
    main()
