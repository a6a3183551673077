"""The console's web application, called as an ASGI server calls it, over reads made by hand:
its pages, its live stream and the HTTP errors bad input gets."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from urllib.parse import unquote

import pytest
import trio

from broker.console import web
from broker.console.actions import Amend, Denied, Guard, Outcome
from broker.console.state import ClusterState, GroupState
from kclient.admin_client import AdminError
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.schema import Data
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


def _scope(target: str, method: str, headers: dict[str, str] | None = None) -> dict[str, object]:
    path, _, query = target.partition("?")
    raw = [(b"host", b"console"), *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": unquote(path), "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
            "headers": raw, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}


async def request(app: web.ASGIApp, target: str, method: str = "GET", *,
                  until: Callable[[bytes], bool] | None = None, content: bytes = b"",
                  headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
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
            return {"type": "http.request", "body": content, "more_body": False}
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
        await app(_scope(target, method, headers), receive, send)
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
    ("/groups", "POST", 405, b"GET and HEAD"),
    ("/groups/billing", "DELETE", 405, b"GET and HEAD"),
    ("/actions/reset-offsets", "GET", 405, b"POST"),
    ("/actions/reset-offsets", "POST", 403, b"read-only"),
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


# ---- actions -----------------------------------------------------------------------------------

ALICE = "Basic " + base64.b64encode(b"alice:secret").decode()
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class Authority:
    """alice:secret signs in; each request an action sends is recorded and allowed, or refused."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.checked: list[tuple[str, str, int]] = []

    def authenticate(self, header: str | None, certificate: str | None = None) -> str | None:
        if certificate is not None:
            return "User:alice" if certificate == "CN=alice" else None
        return "User:alice" if header == ALICE else None

    def check(self, principal: str, host: str, api_key: int, version: int, body: Data) -> Amend | None:
        self.checked.append((principal, host, api_key))
        if self.refuse:
            raise Denied("User:alice may not do this")
        return None


class Runs:
    """Stands in for kcoord groups: the options it was run with; each run sends one request."""

    def __init__(self) -> None:
        self.options: list[list[str]] = []

    def __call__(self, options: Sequence[str], guard: Guard) -> Outcome:
        self.options.append(list(options))
        try:
            guard(8, 9, OffsetCommitRequest())  # as an OffsetCommit of the reset would be
        except Denied as exc:
            return Outcome(403, str(exc), "")
        return Outcome(200, "Done.", "GROUP TOPIC PARTITION NEW-OFFSET")


def acting(reads: Reads, authority: Authority, runs: Runs) -> web.ASGIApp:
    return web.Console(reads, [], None, web.ActionSetup(True, authority, runs)).app()


async def test_an_action_runs_kcoord_groups_for_the_signed_in_user(reads: Reads) -> None:
    authority, runs = Authority(), Runs()
    app = acting(reads, authority, runs)
    status, _, body = await request(app, "/actions/reset-offsets", "POST", headers={**FORM, "Authorization": ALICE},
                                    content=b"group=billing&to=shift&value=-3&topic=orders%3A0")
    assert status == 200 and b"NEW-OFFSET" in body and b"as User:alice" in body
    assert runs.options == [["--reset-offsets", "--execute", "--group", "billing", "--topic", "orders:0",
                             "--shift-by=-3"]]
    assert authority.checked == [("User:alice", "127.0.0.1", 8)]
    for content, expected in [(b"group=billing", ["--delete", "--group", "billing"]),
                              (b"group=billing&topic=orders", ["--delete-offsets", "--group", "billing", "--topic",
                                                               "orders"])]:
        action = "delete-group" if expected[0] == "--delete" else "delete-offsets"
        status, _, _ = await request(app, "/actions/" + action, "POST", headers={**FORM, "Authorization": ALICE},
                                     content=content)
        assert status == 200 and runs.options[-1] == expected
    # The group's page offers the actions, outside the part live updates replace.
    page = (await request(app, "/groups/billing"))[2]
    assert b'form class="action" id="reset-offsets"' in page and page.index(b"</main>") < page.index(b'id="actions"')


async def test_a_refused_request_is_a_403(reads: Reads) -> None:
    status, _, body = await request(acting(reads, Authority(refuse=True), Runs()), "/actions/reset-offsets", "POST",
                                    headers={**FORM, "Authorization": ALICE}, content=b"group=billing&to=earliest")
    assert status == 403 and b"may not do this" in body


@pytest.mark.parametrize(("content", "headers", "status", "says"), [
    (b"group=billing&to=earliest", {}, 401, b"Sign in"),
    (b"group=billing&to=earliest", {"Authorization": "Basic " + base64.b64encode(b"alice:guess").decode()}, 401,
     b"Sign in"),
    (b"group=billing&to=earliest", {"Authorization": ALICE, "Origin": "http://elsewhere"}, 403, b"another site"),
    (b"group=billing&to=earliest", {"Authorization": ALICE, "Sec-Fetch-Site": "cross-site"}, 403, b"another site"),
    (b"group=billing&to=shift&value=ten", {"Authorization": ALICE}, 400, b"whole number"),
    (b"group=billing&to=shift", {"Authorization": ALICE}, 400, b"required"),
    (b"group=billing&to=up", {"Authorization": ALICE}, 400, b"Reset to what"),
    (b"group=billing&to=datetime&value=soon", {"Authorization": ALICE}, 400, b"Error parsing timestamp"),
    (b"group=billing&group=other&to=earliest", {"Authorization": ALICE}, 400, b"group"),
    (b"group=billing&to=earliest&x=1", {"Authorization": ALICE}, 400, b"Unknown field"),
    (b"group=billing&to=earliest&" + b"q" * 20000, {"Authorization": ALICE}, 400, b"larger than"),
    (b"group=nobody&to=earliest", {"Authorization": ALICE}, 404, b"unknown"),
])
async def test_a_bad_action_runs_nothing(reads: Reads, content: bytes, headers: dict[str, str], status: int,
                                         says: bytes) -> None:
    runs = Runs()
    app = acting(reads, Authority(), runs)
    got, answer_headers, body = await request(app, "/actions/reset-offsets", "POST", headers={**FORM, **headers},
                                              content=content)
    assert got == status and says in body, body[-400:]
    assert runs.options == []
    if status == 401:
        assert answer_headers["www-authenticate"].startswith("Basic realm=")


async def test_signing_in_goes_on_to_the_page(reads: Reads) -> None:
    app = acting(reads, Authority(), Runs())
    assert (await request(app, "/login?next=/groups/billing"))[0] == 401
    status, headers, _ = await request(app, "/login?next=/groups/billing", headers={"Authorization": ALICE})
    assert status == 303 and headers["location"] == "/groups/billing"
    status, headers, _ = await request(app, "/login?next=//evil.example/", headers={"Authorization": ALICE})
    assert status == 303 and headers["location"] == "/"
