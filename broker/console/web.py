"""The console's ASGI application (Starlette): its routes, the live streams (server-sent events)
and the limits that turn bad input into a clear HTTP error.

Reads go through ``Snapshots``: one read per page and per half second however many browsers
watch it, in at most ``READERS`` worker threads, so the console can never queue unbounded work
beside the broker's request path. Actions (``actions.py``) are POSTs of a form, by a signed-in user,
from a page of the console itself (``_cross_site``), run in the same worker threads."""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Generic, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

import trio
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from broker.console import pages
from broker.console.actions import ACTIONS, Amend, BadInput, Guard, Outcome, command_line
from broker.console.share_figures import ShareDeliveries
from broker.console.shown_listener import Listener
from broker.console.state import ClusterState, GroupState, Reads
from broker.observability import logs
from broker.observability.metrics_http import registry_text
from kclient.admin_client import AdminError
from protocol.errors import DecodeError
from protocol.schema import Data

T = TypeVar("T")

REFRESH_S = 0.5  # how often a live stream looks for a change; a page is at most this stale
KEEPALIVE_S = 15.0  # a comment on a quiet stream, so proxies and browsers keep it open
# Worker threads reading for the console at once: one, so the reads share one admin client and
# never take more than one thread's share of the interpreter from the broker's loop.
READERS = 1
CACHED_PAGES = 256
MAX_TARGET = 2048  # bytes of path or of query string
MAX_QUERY_VALUE = 200
MAX_GROUP_ID = 1024
MAX_FORM = 16 * 1024  # bytes of an action's form
ACTION_PREFIX = "/actions/"
REALM = 'Basic realm="kcoord console", charset="UTF-8"'
# A read that failed answers 503 naming why (an answer it could not decode included), not a 500.
READ_FAILED = (AdminError, OSError, ConnectionError, RuntimeError, DecodeError)


class Snapshots(Generic[T]):
    """The last read of each key, fresh for ``ttl_s``: concurrent requests for a key wait for one
    read instead of each making their own."""

    def __init__(self, ttl_s: float, limiter: trio.CapacityLimiter, size: int = CACHED_PAGES) -> None:
        self.ttl_s = ttl_s
        self.limiter = limiter
        self.size = size
        self._entries: dict[str, tuple[float, T]] = {}
        self._locks: dict[str, trio.Lock] = {}

    def forget(self, key: str) -> None:
        """Read ``key`` afresh next time: an action changed it."""
        self._entries.pop(key, None)

    async def get(self, key: str, read: Callable[[], T]) -> T:
        lock = self._locks.setdefault(key, trio.Lock())
        async with lock:
            hit = self._entries.get(key)
            if hit is not None and trio.current_time() - hit[0] < self.ttl_s:
                return hit[1]
            value = await trio.to_thread.run_sync(read, limiter=self.limiter, abandon_on_cancel=True)
            self._entries.pop(key, None)
            self._entries[key] = (trio.current_time(), value)
            while len(self._entries) > self.size:  # oldest first: dicts keep insertion order
                del self._entries[next(iter(self._entries))]
        if len(self._locks) > 2 * self.size:
            for k in [k for k, lk in self._locks.items() if k not in self._entries and not lk.locked()]:
                del self._locks[k]
        return value


class GroupNotFound(Exception):
    pass


class Authority(Protocol):
    """Who may act (``rules.Rules``): the principal of a request's credentials, and each request
    of an action put to its API's authorization rule for that principal."""

    def authenticate(self, header: str | None, certificate: str | None = None) -> str | None: ...

    def check(self, principal: str, host: str, api_key: int, version: int, body: Data) -> Amend | None: ...


@dataclass(frozen=True)
class ActionSetup:
    """The console's actions: ``enabled`` (console.actions.enable), who may act, and how an action
    runs (``actions.run`` over this node's bootstrap: blocking, in a worker thread)."""

    enabled: bool
    authority: Authority
    run: Callable[[Sequence[str], Guard], Outcome]


class Console:
    """The pages of one broker, from what ``reads`` reads of the cluster; ``metrics``: the series
    computed at scrape time that /metrics adds to the registry's."""

    def __init__(self, reads: Reads, listeners: Sequence[Listener],
                 metrics: Callable[[], Awaitable[bytes]] | None = None, actions: ActionSetup | None = None,
                 share_figures: Callable[[str], ShareDeliveries] | None = None) -> None:
        self.reads = reads
        self.listeners = list(listeners)
        self.metrics = metrics
        self.actions = actions
        # A share group's deliveries from this node's share partitions: figures and held locks
        # (on the loop: they are read from state the loop changes).
        self.share_figures = share_figures
        self.limiter = trio.CapacityLimiter(READERS)
        self.cluster: Snapshots[ClusterState] = Snapshots(REFRESH_S, self.limiter, 1)
        self.groups: Snapshots[GroupState | None] = Snapshots(REFRESH_S, self.limiter)
        static = resources.files("broker.console") / "static"
        self.assets = {name: (static / name).read_bytes() for name in ("console.js", "console.css")}

    # ---- fragments ----------------------------------------------------------------------------

    async def _cluster(self) -> ClusterState:
        return await self.cluster.get("", self.reads.cluster)

    async def overview(self, request: Request) -> str:
        return pages.overview(await self._cluster(), self.listeners)

    async def group_list(self, request: Request) -> str:
        q, group_type, state = _filters(request)
        return pages.groups(await self._cluster(), q, group_type, state)

    async def group(self, request: Request) -> str:
        group_id = _group_id(request)
        found = await self.groups.get(group_id, lambda: self.reads.group(group_id))
        if found is None:
            raise GroupNotFound(group_id)
        figures = None
        if found.group.group_type == "Share" and self.share_figures is not None:
            figures = self.share_figures(group_id)
        return pages.group(found, figures)

    # ---- endpoints ----------------------------------------------------------------------------

    def page(self, title: Callable[[Request], str], live: Callable[[Request], str],
             fragment: Callable[[Request], Awaitable[str]],
             after: Callable[[Request], str] | None = None) -> Callable[[Request], Awaitable[Response]]:
        """A whole page; ``after``: what follows its live ``<main>`` (forms the live updates must
        not wipe out while someone types in them)."""
        async def endpoint(request: Request) -> Response:
            try:
                body = await fragment(request)
            except GroupNotFound as exc:
                return _error(404, f"Group '{exc}' is unknown to this cluster.")
            except READ_FAILED as exc:
                return _error(503, f"The cluster could not be read: {exc}")
            return HTMLResponse(pages.layout(title(request), live(request), body, version(body),
                                             after(request) if after is not None else ""),
                                headers={"Cache-Control": "no-store"})
        return endpoint

    def _action_forms(self, request: Request) -> str:
        return pages.action_forms(_group_id(request)) if self.actions is not None and self.actions.enabled else ""

    # ---- actions ------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        """Asks the browser for credentials (HTTP basic), then goes on to ``next``: the browser then
        sends them with the forms of the console's pages."""
        if self.actions is None or _principal(self.actions.authority, request) is None:
            return _unauthorized(request)
        target = request.query_params.get("next", "/")
        if not target.startswith("/") or target.startswith("//") or len(target) > MAX_TARGET:
            target = "/"
        return Response(status_code=303, headers={"Location": target, "Cache-Control": "no-store"})

    async def action(self, request: Request) -> Response:
        name = str(request.path_params["action"])
        if name not in ACTIONS:
            return _error(404, f"Unknown action '{name}': the console does {', '.join(ACTIONS)}.")
        setup = self.actions
        if setup is None or not setup.enabled:
            return _error(403, "The console is read-only: actions are off on this broker (console.actions.enable "
                               "= false). Nothing was changed.")
        refused = _cross_site(request)
        if refused:
            return _error(403, refused)
        principal = _principal(setup.authority, request)
        if principal is None:
            return _unauthorized(request)
        try:
            form = await _form(request)
            group_values = form.get("group", [])
            group_id = group_values[0] if len(group_values) == 1 else ""
            if not group_id or len(group_id) > MAX_GROUP_ID:
                raise BadInput(f"The field 'group' is required once, 1 to {MAX_GROUP_ID} characters long.")
            options = command_line(name, group_id, form)
        except BadInput as exc:
            return _error(400, f"{exc} Nothing was changed.")
        try:
            found = await self.groups.get(group_id, lambda: self.reads.group(group_id))
        except READ_FAILED as exc:
            return _error(503, f"The cluster could not be read: {exc}")
        if found is None:
            return _error(404, f"Group '{group_id}' is unknown to this cluster. Nothing was changed.")
        host = request.client.host if request.client is not None else ""
        authority = setup.authority

        def guard(api_key: int, version: int, body: Data) -> Amend | None:
            # On the broker's loop, where the authorizer's ACLs change.
            return trio.from_thread.run_sync(authority.check, principal, host, api_key, version, body)

        outcome = await trio.to_thread.run_sync(lambda: setup.run(options, guard), limiter=self.limiter)
        self.groups.forget(group_id)
        self.cluster.forget("")
        logs.event("console.action", action=name, group=group_id, principal=principal, client_host=host,
                   status=outcome.status, summary=outcome.summary[:200])
        return HTMLResponse(pages.action_result(outcome.status, name, group_id, principal, outcome.summary,
                                                outcome.output),
                            status_code=outcome.status, headers={"Cache-Control": "no-store"})

    def live(self, fragment: Callable[[Request], Awaitable[str]]) -> Callable[[Request], Awaitable[Response]]:
        """A stream of ``page`` events, each the page's new ``<main>`` fragment, sent when it changed."""
        async def endpoint(request: Request) -> Response:
            try:
                first = await fragment(request)
            except GroupNotFound as exc:
                return _error(404, f"Group '{exc}' is unknown to this cluster.")
            except READ_FAILED as exc:
                return _error(503, f"The cluster could not be read: {exc}")

            async def events() -> AsyncIterator[str]:
                # retry: how soon the browser reconnects when the broker restarts.
                yield "retry: 1000\n" + _event("page", first, version(first))
                last, quiet_since = first, time.monotonic()
                while True:
                    await trio.sleep(REFRESH_S)
                    try:
                        body = await fragment(request)
                    except GroupNotFound:
                        body = '<p class="notice">This group no longer exists.</p>'
                    except READ_FAILED as exc:
                        yield _event("trouble", f"The cluster could not be read: {exc}")
                        continue
                    if body != last:
                        last, quiet_since = body, time.monotonic()
                        yield _event("page", body, version(body))
                    elif time.monotonic() - quiet_since > KEEPALIVE_S:
                        quiet_since = time.monotonic()
                        yield ": still here\n\n"

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        return endpoint

    async def metrics_endpoint(self, request: Request) -> Response:
        """The Prometheus series, as the metrics listener serves them."""
        more = await self.metrics() if self.metrics is not None else b""
        return Response(await registry_text() + more, media_type=CONTENT_TYPE_LATEST)

    def asset(self, name: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return Response(self.assets[name], media_type=media_type, headers={"Cache-Control": "max-age=60"})
        return endpoint

    def app(self) -> ASGIApp:
        def group_title(request: Request) -> str:
            return "group " + _group_id(request)

        routes = [
            Route("/", self.page(lambda r: "overview", lambda r: "/live/overview", self.overview)),
            Route("/groups", self.page(lambda r: "groups", lambda r: pages.groups_live(*_filters(r)),
                                       self.group_list)),
            Route("/groups/{group_id:path}", self.page(group_title, lambda r: "/live" + r.url.path, self.group,
                                                       self._action_forms)),
            Route("/live/overview", self.live(self.overview)),
            Route("/live/groups", self.live(self.group_list)),
            Route("/live/groups/{group_id:path}", self.live(self.group)),
            Route("/metrics", self.metrics_endpoint),
            Route("/login", self.login),
            Route(ACTION_PREFIX + "{action}", self.action, methods=["POST"]),
            Route("/static/console.js", self.asset("console.js", "text/javascript; charset=utf-8")),
            Route("/static/console.css", self.asset("console.css", "text/css; charset=utf-8")),
        ]
        app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
        return Limits(app)


def version(fragment: str) -> str:
    """A fragment's version: the page carries it, and each event its own as its id, so the
    browser swaps the page's contents only when they differ from what it shows."""
    return hashlib.blake2b(fragment.encode(), digest_size=8).hexdigest()


def _event(name: str, data: str, event_id: str = "") -> str:
    """One server-sent event: its data on as many ``data:`` lines as it has lines."""
    head = f"event: {name}\n" + (f"id: {event_id}\n" if event_id else "")
    return head + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


def _error(status: int, message: str) -> Response:
    return HTMLResponse(pages.error_page(status, message), status_code=status, headers={"Cache-Control": "no-store"})


def _certificate(request: Request) -> str | None:
    """The subject of the client certificate the request's TLS connection presented (``https.py``
    puts it in the scope), None without one."""
    tls = (request.scope.get("extensions") or {}).get("tls") or {}
    subject = tls.get("client_cert_name")
    return subject if isinstance(subject, str) else None


def _principal(authority: Authority, request: Request) -> str | None:
    return authority.authenticate(request.headers.get("authorization"), _certificate(request))


def _unauthorized(request: Request) -> Response:
    subject = _certificate(request)
    if subject is not None:
        # Credentials would not help: the certificate is the user, as on the broker's SSL listeners.
        return _error(401, f"The client certificate's subject ({subject}) matches no ssl.principal.mapping.rules "
                           "rule: it is not authenticated, as on the broker's SSL listeners.")
    response = _error(401, "Sign in with a user of this broker (its SCRAM credentials) to act on groups.")
    response.headers["WWW-Authenticate"] = REALM
    return response


def _cross_site(request: Request) -> str:
    """Why a POST may come from another site's page (the browser would add the user's credentials
    to it), else empty. Browsers name the page's origin (``Origin``, or ``Sec-Fetch-Site``); a
    client that names neither is no browser acting for another site."""
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if origin is not None:
        if origin == "null" or urlsplit(origin).netloc.lower() != host.lower():
            return f"A form of another site ({origin}) may not act on this console. Nothing was changed."
    elif request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return "A form of another site may not act on this console. Nothing was changed."
    return ""


async def _form(request: Request) -> dict[str, list[str]]:
    """An action's form (application/x-www-form-urlencoded), read up to ``MAX_FORM`` bytes."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise BadInput("An action is a form (application/x-www-form-urlencoded).")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            raise BadInput(f"The form is larger than {MAX_FORM} bytes.")
    try:
        return parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"The form could not be read: {exc}.") from None


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, exc.detail)


def _group_id(request: Request) -> str:
    group_id = str(request.path_params["group_id"])
    if not group_id or len(group_id) > MAX_GROUP_ID:
        raise HTTPException(400, f"A group id is 1 to {MAX_GROUP_ID} characters long.")
    return group_id


def _filters(request: Request) -> tuple[str, str, str]:
    """The groups list's search (``q``), ``type`` and ``state``; anything else is refused."""
    unknown = sorted(set(request.query_params) - {"q", "type", "state"})
    if unknown:
        raise HTTPException(400, f"Unknown query parameter {unknown[0]!r}: the groups list takes q, type and state.")
    values = tuple(request.query_params.get(k, "") for k in ("q", "type", "state"))
    if any(len(v) > MAX_QUERY_VALUE for v in values):
        raise HTTPException(400, f"A filter is at most {MAX_QUERY_VALUE} characters long.")
    return values[0], values[1], values[2]


class Limits:
    """Refuses, before any routing, what no page needs: a method other than GET and HEAD (POST to
    an action only) and paths or query strings longer than ``MAX_TARGET``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            status, message = 0, ""
            action = scope["path"].startswith(ACTION_PREFIX)
            if action and scope["method"] != "POST":
                status, message = 405, "An action is a POST of its form."
            elif not action and scope["method"] not in ("GET", "HEAD"):
                status, message = 405, "Pages are read with GET and HEAD; actions are POSTs to /actions/."
            elif len(scope.get("raw_path") or scope["path"].encode()) > MAX_TARGET:
                status, message = 414, f"The path is longer than {MAX_TARGET} bytes."
            elif len(scope.get("query_string", b"")) > MAX_TARGET:
                status, message = 414, f"The query string is longer than {MAX_TARGET} bytes."
            if status:
                headers = {"Allow": "POST" if action else "GET, HEAD"} if status == 405 else {}
                response = HTMLResponse(pages.error_page(status, message), status_code=status, headers=headers)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
