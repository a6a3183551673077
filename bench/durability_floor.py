"""What one durable round trip costs on this machine before kcoord does any work.

    python -m bench.durability_floor [--seconds 3]

A minimal trio server answers 4-byte-framed requests, one in flight from a client in another
process, after (a) nothing, (b) appending 200 bytes to a file and fdatasync-ing it on the event
loop, and (c) the same append with the fdatasync on a long-lived worker thread (kcoord's
``SyncThreads``), the event loop woken when it is done. Prints the p50/p99 round trip of each,
(d) the worker thread also writing the reply itself, and fdatasync alone. (d) is the floor for a
durable acknowledgement with the disk wait off the event loop.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import struct
import tempfile
import time
from typing import Any

import trio

from broker.log_runtime.sync_threads import SyncThreads
from testkit.ports import free_port

RECORD = b"x" * 200
REQUEST = struct.pack(">i", 8) + b"r" * 8
REPLY = struct.pack(">i", 8) + b"a" * 8


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
                threads.jobs.put((lambda: (os.fdatasync(fd), os.write(conn, REPLY)), lambda _exc: None))

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    ready.set()
    await trio.serve_listeners(handle, listeners)


def server_process(port: int, mode: str, path: str, ready: Any) -> None:
    trio.run(serve, port, mode, path, ready)


def client(port: int, seconds: float) -> list[float]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    took = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t = time.perf_counter()
        sock.sendall(REQUEST)
        got = b""
        while len(got) < len(REPLY):
            got += sock.recv(64)
        took.append(time.perf_counter() - t)
    sock.close()
    return took


def show(name: str, took: list[float]) -> None:
    took = sorted(took)
    print(f"{name:52} p50 {statistics.median(took) * 1000:.3f} ms  p99 {took[int(len(took) * 0.99)] * 1000:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="kcoord-floor-") as tmp:
        show("fdatasync of a 200-byte append, alone", fdatasync_alone(f"{tmp}/alone"))
        for mode, name in (("none", "round trip, no write"), ("loop", "round trip, fdatasync on the event loop"),
                           ("thread", "round trip, fdatasync on a worker thread"),
                           ("thread-writes", "round trip, worker thread syncs and replies")):
            port = free_port()
            ready = ctx.Event()
            server = ctx.Process(target=server_process, args=(port, mode, f"{tmp}/{mode}", ready), daemon=True)
            server.start()
            try:
                ready.wait(30)
                show(name, client(port, args.seconds))
            finally:
                server.kill()
                server.join()


if __name__ == "__main__":
    main()
