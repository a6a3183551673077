"""The console's web application, called as an ASGI server calls it, over reads made by hand:
its pages, its live stream and the HTTP errors bad input gets."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

import pytest
import trio

from broker.console import web
from broker.console.state import ClusterState, GroupState
from kclient.admin_client import AdminError
from tests.unit.console.fakes import billing, cluster

Message = dict[str, object]
pytestmark = pytest.mark.trio


class Reads:
    """Stands in for the wire reads: what each returns now, and how often it ran."""

    def __init__(self) -> None:
        self.read_cluster: Callable[[], ClusterState] = cluster
        self.groups: dict[str, Callable[[], GroupState]] = {"billing": billing}
        self.calls = 0

    def cluster(self) -> ClusterState:
        self.calls += 1
        return self.read_cluster()

    def group(self, group_id: str) -> GroupState | None:
        self.calls += 1
        found = self.groups.get(group_id)
        return None if found is None else found()


@pytest.fixture
def reads() -> Reads:
    return Reads()


def _scope(target: str, method: str) -> dict[str, object]:
    path, _, query = target.partition("?")
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": unquote(path), "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
            "headers": [(b"host", b"console")], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}


async def request(app: web.ASGIApp, target: str, method: str = "GET", *,
                  until: Callable[[bytes], bool] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a request; for a stream, the body until ``until`` holds of it,
    when the client goes away."""
    sent: list[Message] = []
    body = bytearray()
    gone = trio.Event()
    asked = False

    async def receive() -> Message:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            assert isinstance(chunk, bytes)
            body.extend(chunk)
            if until is not None and until(bytes(body)):
                gone.set()

    with trio.fail_after(30):
        await app(_scope(target, method), receive, send)
    start = sent[0]
    assert start["type"] == "http.response.start"
    raw = start["headers"]
    assert isinstance(raw, list)
    headers = {k.decode().lower(): v.decode() for k, v in raw}
    status = start["status"]
    assert isinstance(status, int)
    return status, headers, bytes(body)


def console(reads: Reads) -> web.ASGIApp:
    return web.Console(reads, []).app()


async def test_pages_are_served(reads: Reads) -> None:
    app = console(reads)
    status, headers, body = await request(app, "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and b"<h1>Cluster</h1>" in body
    status, _, body = await request(app, "/groups?q=bill&type=Classic")
    assert status == 200 and b"1 of 2 groups" in body and b'data-live="/live/groups?q=bill&amp;type=Classic"' in body
    status, _, body = await request(app, "/groups/billing")
    assert status == 200 and b"session-timeout" in body and b'data-live="/live/groups/billing"' in body
    status, headers, body = await request(app, "/static/console.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript") and b"EventSource" in body
    status, headers, _ = await request(app, "/static/console.css")
    assert status == 200 and headers["content-type"].startswith("text/css")
    status, headers, body = await request(app, "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain") and b"# TYPE" in body


async def test_many_requests_at_once_share_one_read(reads: Reads) -> None:
    app = console(reads)
    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(request, app, "/")
    assert reads.calls == 1


@pytest.mark.parametrize(("target", "method", "status", "says"), [
    ("/groups/nobody", "GET", 404, b"unknown"),
    ("/live/groups/nobody", "GET", 404, b"unknown"),
    ("/groups/%ZZ", "GET", 404, b"unknown"),
    ("/nowhere", "GET", 404, b"404"),
    ("/groups?q=" + "x" * 5000, "GET", 414, b"query string"),
    ("/groups/" + "x" * 5000, "GET", 414, b"path"),
    ("/groups/" + "x" * 1500, "GET", 400, b"group id"),
    ("/groups?q=" + "x" * 500, "GET", 400, b"at most"),
    ("/groups?sort=desc", "GET", 400, b"Unknown query parameter"),
    ("/groups", "POST", 405, b"read-only"),
    ("/groups/billing", "DELETE", 405, b"read-only"),
])
async def test_bad_input_gets_a_clear_http_error(reads: Reads, target: str, method: str, status: int,
                                               says: bytes) -> None:
    app = console(reads)
    got, headers, body = await request(app, target, method)
    assert got == status and says in body and headers["content-type"].startswith("text/html")
    # Nothing else is disturbed: the pages are still served.
    assert (await request(app, "/groups/billing"))[0] == 200


async def test_a_cluster_that_cannot_be_read_is_a_503(reads: Reads) -> None:
    def broken() -> ClusterState:
        raise AdminError(15, "coordinator not available")

    reads.read_cluster = broken
    status, _, body = await request(console(reads), "/")
    assert status == 503 and b"COORDINATOR_NOT_AVAILABLE" in body


async def test_the_live_stream_sends_the_page_then_each_change(reads: Reads) -> None:
    app = console(reads)
    page = (await request(app, "/groups/billing"))[2]
    shown = page.split(b'data-version="', 1)[1].split(b'"', 1)[0]
    changed = trio.Event()

    def updated(body: bytes) -> bool:
        if b"event: page" in body and not changed.is_set():
            reads.groups["billing"] = lambda: billing(members=2, lag=3)
            changed.set()
        return body.count(b"event: page") >= 2

    status, headers, body = await request(app, "/live/groups/billing", until=updated)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    first, second = body.split(b"event: page")[1:3]
    assert b'<b class="lag">7</b>' in first and b'<b class="lag">3</b>' in second
    assert b"worker-1" in second and b"worker-1" not in first
    assert all(line.startswith((b"data: ", b"retry: ", b"event: ", b"id: ")) for line in body.splitlines() if line)
    assert body.count(b"\nid: ") == 2
    # The first event is what the page shows: its id is the page's version, so it is not swapped in.
    assert body.split(b"\nid: ", 1)[1].split(b"\n", 1)[0] == shown and len(shown) == 16
