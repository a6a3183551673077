"""Serving the console: Hypercorn's trio worker runs the ASGI application as tasks of the broker's
own trio loop (no thread, no second event loop), on its own listener."""

from __future__ import annotations

import logging
import math
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

import trio

from broker.console.shown_listener import Listener
from broker.observability import logs
from broker.security.listeners import ListenerSpec
from broker.security.tls import DEFAULT_MAPPER, PrincipalMapper

if TYPE_CHECKING:
    from hypercorn.config import Config
    from hypercorn.typing import ASGIFramework

    from broker.console.rules import TableEntry
    from broker.console.share_figures import ShareDeliveries
    from broker.handlers.request_checks import RequestChecks

_ANY_HOST = ("", "0.0.0.0", "::")
_BACKLOG = 100  # pending console connections


@dataclass(frozen=True)
class ActionRules:
    """What the console's actions are checked with: console.actions.enable, the API table and its
    authorization rules (None: the authorizer is off) and the broker's SCRAM credentials."""

    enabled: bool
    checks: RequestChecks | None
    table: Sequence[TableEntry]
    check_password: Callable[[str, str], bool]
    mapper: PrincipalMapper = DEFAULT_MAPPER  # ssl.principal.mapping.rules, for client certificates


def reading_through(specs: Sequence[ListenerSpec], addresses: Mapping[str, tuple[str, int]]
                    ) -> tuple[str | None, list[Listener]]:
    """The address of this node's first PLAINTEXT listener, which the console reads the cluster
    through as a client (None without one), and every listener to show. ``addresses``: each
    listener's advertised address, whose port is the bound one for a listener on port 0."""
    shown = [Listener(s.name, s.protocol, "{}:{}".format(*addresses.get(s.name, (s.host, s.port)))) for s in specs]
    for spec in specs:
        if spec.protocol == "PLAINTEXT":
            host = "127.0.0.1" if spec.host in _ANY_HOST else spec.host
            port = spec.port or addresses.get(spec.name, (host, 0))[1]
            return (f"[{host}]:{port}" if ":" in host else f"{host}:{port}"), shown
    return None, shown


async def _never() -> None:
    # Hypercorn installs SIGINT/SIGTERM handlers without a shutdown trigger; the broker owns its
    # signals, and the console stops when the broker's nursery is cancelled.
    await trio.sleep(math.inf)


async def serve_console(host: str, port: int, bootstrap: str, listeners: Sequence[Listener],
                        metrics: Callable[[], Awaitable[bytes]] | None = None, rules: ActionRules | None = None,
                        share_figures: Callable[[str], ShareDeliveries] | None = None,
                        tls: ssl.SSLContext | None = None,
                        *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serves the console on ``host``:``port`` (0: any free port), reading the cluster through
    ``bootstrap``; over TLS with ``tls`` (``https.console_context``); reports the bound port once it
    listens.

    Over plain HTTP the port is bound and listening at once, but the web stack (Hypercorn, Starlette,
    the pages) is loaded only when the first client connects, and then serves that socket: a console
    nobody opens costs the broker neither the memory (about 5 MB) nor the startup time of it."""
    if tls is not None:
        app, config = _web_app(host, port, bootstrap, listeners, metrics, rules, share_figures)
        from broker.console.https import serve_https

        async with trio.open_nursery() as nursery:
            bound: int = await nursery.start(serve_https, app, config, tls, host, port)
            url = f"https://[{host}]:{bound}" if ":" in host else f"https://{host}:{bound}"
            logs.event("console.listening", host=host, port=bound, url=url)
            task_status.started(bound)
        return
    sock = trio.socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        await sock.bind((host, port))
        sock.listen(_BACKLOG)
        bound = sock.getsockname()[1]
        url = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
        logs.event("console.listening", host=host, port=bound, url=url)
        task_status.started(bound)
        await trio.lowlevel.wait_readable(sock)  # the first client is waiting to be accepted
    except BaseException:
        sock.close()
        raise
    from hypercorn.trio import serve

    app, config = _web_app(host, port, bootstrap, listeners, metrics, rules, share_figures)
    # Hypercorn serves the socket already listening, the first client in its queue.
    config.bind = [f"fd://{sock.detach()}"]
    await serve(app, config, shutdown_trigger=_never)


def _web_app(host: str, port: int, bootstrap: str, listeners: Sequence[Listener],
             metrics: Callable[[], Awaitable[bytes]] | None, rules: ActionRules | None,
             share_figures: Callable[[str], ShareDeliveries] | None) -> tuple[ASGIFramework, Config]:
    """The console's ASGI application and Hypercorn's configuration for it."""
    from hypercorn.config import Config

    from broker.console import actions
    from broker.console.rules import Rules
    from broker.console.state import Reader
    from broker.console.web import ActionSetup, Console

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    # Errors of the web stack itself, in the broker's log.
    config.errorlog = logging.getLogger("kcoord.console")
    config.include_server_header = False
    # A request line and headers larger than this are answered 400 by the HTTP parser.
    config.h11_max_incomplete_size = 16 * 1024
    config.graceful_timeout = 1.0
    config.backlog = _BACKLOG
    # Starlette and Hypercorn each declare the ASGI interface with their own (equivalent) types.
    setup = None if rules is None else ActionSetup(
        rules.enabled, Rules(rules.checks, rules.table, rules.check_password, rules.mapper),
        partial(actions.run, bootstrap))
    return cast("ASGIFramework", Console(Reader(bootstrap), listeners, metrics, setup, share_figures).app()), config
