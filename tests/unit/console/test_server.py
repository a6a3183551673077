"""Where the console listens and which listener of its node it reads the cluster through."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from broker.configs.node_config import BrokerConfig, parse_http_listener
from broker.console.server import reading_through
from broker.console.shown_listener import Listener
from broker.security.listeners import ListenerSpec

ROOT = Path(__file__).resolve().parents[3]


def test_the_console_listens_on_the_listeners_host_by_default_and_is_off_when_empty() -> None:
    default = BrokerConfig.load(None, [], environ={})
    assert parse_http_listener("console.listener", default["console.listener"], default.listener.host) == (
        "127.0.0.1", 9465)
    everywhere = BrokerConfig.load(None, ["listeners=PLAINTEXT://0.0.0.0:9092"], environ={})
    assert parse_http_listener("console.listener", everywhere["console.listener"],
                               everywhere.listener.host) == ("0.0.0.0", 9465)
    off = BrokerConfig.load(None, ["console.listener="], environ={})
    assert parse_http_listener("console.listener", off["console.listener"], off.listener.host) is None


def test_it_reads_through_the_first_plaintext_listener_on_loopback_when_that_listens_everywhere() -> None:
    specs = [ListenerSpec("SECURE", "SASL_SSL", "0.0.0.0", 9093), ListenerSpec("INSIDE", "PLAINTEXT", "0.0.0.0", 0)]
    bootstrap, shown = reading_through(specs, {"SECURE": ("broker.example", 9093), "INSIDE": ("10.0.0.5", 40123)})
    assert bootstrap == "127.0.0.1:40123"  # port 0: the port it was bound to
    assert shown == [Listener("SECURE", "SASL_SSL", "broker.example:9093"),
                     Listener("INSIDE", "PLAINTEXT", "10.0.0.5:40123")]


def test_without_a_plaintext_listener_there_is_nothing_to_read_through() -> None:
    bootstrap, shown = reading_through([ListenerSpec("SECURE", "SSL", "127.0.0.1", 9093)], {})
    assert bootstrap is None and shown == [Listener("SECURE", "SSL", "127.0.0.1:9093")]


_LAZY = """
import sys
import trio
from broker.console.server import serve_console

async def main() -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_console, "127.0.0.1", 0, "127.0.0.1:9", [])
        before = "hypercorn" in sys.modules or "broker.console.pages" in sys.modules or "kclient" in sys.modules
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(b"GET /static/console.css HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        head = b""
        with trio.fail_after(30):
            while b"\\r\\n" not in head:
                head += await stream.receive_some(1024)
        print(before, "hypercorn" in sys.modules, head.split(b"\\r\\n")[0].decode())
        nursery.cancel_scope.cancel()

trio.run(main)
"""


def test_the_web_stack_is_loaded_by_the_first_client_not_at_startup() -> None:
    """A fresh process (this one may have loaded Hypercorn already): the console listens without
    the web stack (nor its pages and the client tools they read through), and its first client is
    served by it."""
    done = subprocess.run([sys.executable, "-c", _LAZY], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    before, after, status = done.stdout.split(maxsplit=2)
    assert (before, after, status.split()[:2]) == ("False", "True", ["HTTP/1.1", "200"]), done.stdout
