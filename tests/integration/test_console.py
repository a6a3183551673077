"""The console with real clients: a group of confluent-kafka consumers loses one member that leaves
and one that times out, and the console shows both rebalances with their causes, over HTTP, on its
live stream, and in a real headless Chromium that is never reloaded."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from kclient.group_history import JournalTail, read_events
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, wait_for
from tests.integration.helpers.console import GROUP, EventStream, Scenario, get, three_members
from tests.integration.helpers.console_big import (
    BIG_GROUP,
    BROKER_OVERRIDES,
    CHROMEDRIVER,
    CHROMIUM,
    big_group,
    chromium,
    open_and_measure,
    rows,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def scenario(broker: BrokerProcess) -> Iterator[Scenario]:
    s = three_members(broker)
    yield s
    s.close()


def _table(page: str, name: str) -> str:
    """One table of a group page; empty when the page is an error (a read that failed for now)."""
    return page.split(f'<table class="{name}">', 1)[-1].split("</table>", 1)[0] if name in page else ""


def _rebalances(page: str) -> list[str]:
    """The causes in the rebalance table of a group page, newest first."""
    return re.findall(r'<span class="cause">([\w-]+)</span>', _table(page, "rebalances"))


def test_the_console_serves_the_group_its_rebalances_and_their_causes(scenario: Scenario) -> None:
    broker = scenario.broker
    status, ctype, page = get(broker, f"/groups/{GROUP}")
    assert status == 200 and ctype.startswith("text/html")
    stream = EventStream(broker, f"/live/groups/{GROUP}")
    try:
        wait_for(lambda: stream.pages(), 30, "the stream's first page", seen=lambda: stream.raw[:500])
        assert " 200 " in stream.head.split("\r\n")[0] and "text/event-stream" in stream.head
        tail = JournalTail(broker.bootstrap)
        formed = tail.events(GROUP)
        first_read = tail.positions()
        scenario.leave()
        wait_for(lambda: "member-left" in _rebalances(get(broker, f"/groups/{GROUP}")[2]), 60,
                 "the leave on the group page")
        scenario.time_out()
        wait_for(lambda: "session-timeout" in _rebalances(get(broker, f"/groups/{GROUP}")[2]), 60,
                 "the timeout on the group page")
        page = get(broker, f"/groups/{GROUP}")[2]
        causes = _rebalances(page)
        assert causes.index("session-timeout") < causes.index("member-left")  # newest first
        assert '<b class="state">Stable</b>' in page and "<td>stayer</td>" in page
        assert "<td>leaver</td>" not in page.split('<table class="members">', 1)[1]
        assert '<svg class="timeline"' in page and 'data-cause="session-timeout"' in page
        assert re.search(r'<span class="who" title="leaver/[\w-]+">', page), "who left is named"
        # The stream sent the change itself, on the connection opened before it.
        wait_for(lambda: any("session-timeout" in p for p in stream.pages()), 30, "the timeout on the stream")
        assert not any("session-timeout" in p for p in stream.pages()[:1])
        # The console's journal tail, read again from where it stopped, holds what a full read holds.
        wait_for(lambda: tail.events(GROUP) == read_events(broker.bootstrap, GROUP), 30,
                 "the tail to hold the journal's events")
        assert len(tail.events(GROUP)) > len(formed)
        assert all(tail.positions()[p] > offset for p, offset in first_read.items())
        tail.close()
    finally:
        stream.close()

    # Lag in records and seconds: the stayer commits the start of each of its partitions.
    scenario.stayer.commit([TopicPartition(t, p, 0) for t, p in scenario.stayer.held()])
    # Committed 0, log end 10, lag 10 records, and the age of record 0 in seconds.
    behind = re.compile(r"<td>0</td><td>10</td><td>10</td><td>(\d+)</td>")
    offsets: list[str] = []

    def aged() -> bool:
        offsets[:] = [_table(get(broker, f"/groups/{GROUP}")[2], "offsets")]
        return len(behind.findall(offsets[0])) == 3

    wait_for(aged, 30, "the committed partitions' lag in records and seconds", seen=lambda: offsets)
    # Produced before the timeout (6 s) the scenario waited for: seconds old, not just now.
    assert all(int(age) >= 1 for age in behind.findall(offsets[0])), offsets

    status, _, groups = get(broker, "/groups")
    assert status == 200 and f'href="/groups/{GROUP}"' in groups and "session-timeout" in groups
    listed = re.search(r"<td>range</td><td>30</td><td>(\d+)</td>", groups)  # lag in records and seconds
    assert listed is not None and int(listed.group(1)) >= 1, groups
    status, _, overview = get(broker, "/")
    assert status == 200 and broker.bootstrap in overview and "console-t" in overview
    status, ctype, metrics = get(broker, "/metrics")
    assert status == 200 and ctype.startswith("text/plain") and "kcoord_" in metrics


def test_bad_requests_get_clear_errors_and_disturb_nothing(broker: BrokerProcess) -> None:
    for path, status in [("/groups/no-such-group", 404), ("/groups/%ZZ%00", 404), ("/nowhere", 404),
                         ("/groups?q=" + "x" * 5000, 414), ("/groups?q=" + "x" * 40000, 414),
                         ("/groups?bogus=1", 400), ("/live/groups/no-such-group", 404)]:
        got, ctype, body = get(broker, path)
        assert (got, ctype.split(";")[0]) == (status, "text/html"), (path, got, body[:200])
    # A request head larger than the HTTP parser buffers is refused by the parser itself.
    got = get(broker, "/groups?q=" + "x" * 300_000)[0]
    assert got in (400, 414, 431), got
    assert get(broker, "/groups")[0] == 200
    assert broker.proc is not None and broker.proc.poll() is None


@pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
def test_a_browser_sees_the_group_change_live(scenario: Scenario) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    driver = chromium()
    try:
        driver.get(f"http://127.0.0.1:{scenario.broker.console_port}/groups/{GROUP}")

        def texts(css: str) -> list[str]:
            """The text of every element ``css`` selects; [] when a live update replaced them meanwhile."""
            try:
                return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
            except StaleElementReferenceException:
                return []

        wait_for(lambda: texts(".group-id") == [GROUP], 30, "the group's page")
        # A mark on the window: still there at the end means the page was never reloaded.
        driver.execute_script("window.notReloaded = true")
        wait_for(lambda: texts("#status") == ["live"], 30, "the live stream to connect")

        def members() -> list[str]:
            return texts("table.members tbody td:nth-child(2)")

        def causes() -> list[str]:
            return texts("table.rebalances .cause")

        wait_for(lambda: len(members()) == 3, 30, "three members on the page", seen=members)
        scenario.leave()
        wait_for(lambda: "member-left" in causes(), 60, "the leave to appear", seen=causes)
        scenario.time_out()
        wait_for(lambda: "session-timeout" in causes(), 60, "the timeout to appear", seen=causes)
        wait_for(lambda: members() == ["stayer"], 30, "one member left", seen=members)
        assert driver.execute_script("return window.notReloaded") is True
        assert int(driver.execute_script("return document.getElementById('live').dataset.updates") or 0) >= 2
        drawn = driver.execute_script(
            "return Array.from(document.querySelectorAll('svg.timeline g.span')).map(g => g.dataset.cause)")
        assert set(drawn) >= {"member-left", "session-timeout"}

        # Assignments per member over time: the leaver's partition drawn moving to a member that
        # stayed, and the stayer's lane ending with all three partitions.
        def moves() -> list[list[str]]:
            try:
                return list(driver.execute_script(
                    "return Array.from(document.querySelectorAll('svg.timeline g.move'))"
                    ".map(g => [g.dataset.from, g.dataset.to, g.dataset.partitions])"))
            except StaleElementReferenceException:
                return []

        def handed_over() -> bool:
            return any(src.startswith("leaver/") and dst and not dst.startswith("leaver/") for src, dst, _ in moves())

        wait_for(handed_over, 30, "the leaver's partition moving to another member", seen=moves)

        def stayer_holds() -> list[str]:
            # Tooltips are not displayed: their textContent, not Selenium's visible text.
            return list(driver.execute_script(
                "return Array.from(document.querySelectorAll("
                "\"svg.timeline g.lane[data-member^='stayer/'] g.held[data-current] title\"))"
                ".map(t => t.textContent)"))

        wait_for(lambda: any("held 3: console-t-0, console-t-1, console-t-2" in t for t in stayer_holds()), 30,
                 "the stayer's lane holding the three partitions", seen=stayer_holds)
        shots = os.environ.get("KCOORD_CONSOLE_SCREENSHOTS")
        if shots:  # the pictures of docs/console.md: this page, then the groups list
            driver.set_window_size(1280, 1100)
            driver.save_screenshot(os.path.join(shots, "console-group.png"))
            driver.get(f"http://127.0.0.1:{scenario.broker.console_port}/groups")
            wait_for(lambda: texts("#status") == ["live"], 30, "the groups list's stream")
            driver.save_screenshot(os.path.join(shots, "console-groups.png"))
    finally:
        driver.quit()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_any_node_of_a_cluster_shows_a_group_another_node_coordinates(etcd: Any, tmp_path: Path) -> None:
    """Two nodes: the group's coordinator (and its journal partition's leader) is node 2, and node
    1's console shows the group, its member, its committed offsets and its rebalance."""
    from tests.integration.helpers.cluster import Cluster

    cluster = Cluster(etcd, tmp_path)
    consumer: ThreadedConsumer | None = None
    try:
        for node in (1, 2):
            cluster.start_node(node)
        cluster.wait_spread({1, 2})
        bootstrap = ",".join(b.bootstrap for b in cluster.alive())
        create_topic(bootstrap, "spread", 2)
        group = cluster.groups_on(2, 1, "far")[0]
        consumer = ThreadedConsumer(bootstrap, group, ["spread"], **{"client.id": "far-reader"})
        wait_for(lambda: len(consumer.held()) == 2, 60, "the member to hold both partitions")
        consumer.commit([TopicPartition("spread", p, 0) for p in range(2)])
        first = cluster.nodes[1]

        def page() -> str:
            return get(first, f"/groups/{group}")[2]

        wait_for(lambda: "new-member-joined" in _rebalances(page()), 60, "node 1 to show the group's rebalance",
                 seen=lambda: page()[:300])
        shown = page()
        assert "coordinator <b>node 2</b>" in shown and "<td>far-reader</td>" in shown
        assert "<td>spread-0</td><td>0</td>" in shown and "<td>spread-1</td><td>0</td>" in shown
        status, _, overview = get(first, "/")
        assert status == 200 and cluster.nodes[2].bootstrap in overview
        assert f'href="/groups/{group}"' in get(first, "/groups")[2]
    finally:
        if consumer is not None:
            consumer.close()
        cluster.stop_all()


def test_the_groups_list_shows_classic_consumer_and_share_groups(broker_factory: Any) -> None:
    """One group of each type real clients form: a classic and a consumer-protocol (KIP-848)
    group of confluent-kafka consumers and a share group of its share consumer, each listed with
    its type, state and members, each with its own page."""
    from tests.integration.helpers.share import OVERRIDES, joined, poll_until, produce
    from tests.integration.helpers.share import consumer as share_consumer

    broker = broker_factory(OVERRIDES)
    create_topic(broker.bootstrap, "kinds", 2)
    produce(broker, "kinds", [f"m{i}" for i in range(10)])
    classic = ThreadedConsumer(broker.bootstrap, "kind-classic", ["kinds"])
    modern = ThreadedConsumer(broker.bootstrap, "kind-consumer", ["kinds"], **{"group.protocol": "consumer"})
    shared = share_consumer(broker, "kind-share", "kinds")
    try:
        joined(shared)
        wait_for(lambda: len(classic.held()) == 2 and len(modern.held()) == 2, 60, "both consumers assigned")
        poll_until(shared, lambda got: len(got) == 10)
        expected = {"kind-classic": "Classic", "kind-consumer": "Consumer", "kind-share": "Share"}

        def listed() -> dict[str, tuple[str, str, str]]:
            rows = re.findall(r'<tr><td><a href="/groups/([\w-]+)">[\w-]+</a></td><td>(\w+)</td><td>(\w+)</td>'
                              r"<td>(\d+|-)</td>", get(broker, "/groups")[2])
            return {g: (t, s, m) for g, t, s, m in rows}

        wait_for(lambda: {g: v[0] for g, v in listed().items()} == expected
                 and all(v[1:] == ("Stable", "1") for v in listed().values()), 60,
                 "each group listed with its type, Stable with its member", seen=listed)
        for group, kind in expected.items():
            status, _, page = get(broker, f"/groups/{group}")
            assert status == 200 and f"type <b>{kind}</b>" in page and "kinds-0" in page, (group, page[:300])
        share_page = get(broker, "/groups/kind-share")[2]
        assert "<th>start offset</th>" in share_page
        assert get(broker, "/groups?type=Share")[2].count('href="/groups/kind-') == 1
    finally:
        shared.close()
        classic.close()
        modern.close()


def test_a_share_groups_page_counts_its_redeliveries_and_poison_records(broker_factory: Any) -> None:
    """A share consumer releases one record at each delivery until the delivery limit archives it
    (a poison record) and accepts the others: the group's page counts the redeliveries and the
    record archived at the limit."""
    from confluent_kafka import AcknowledgeType

    from tests.integration.helpers import share

    broker = broker_factory(share.OVERRIDES)
    share.make_topic(broker, "deliveries")
    worker = share.consumer(broker, "poisoned", "deliveries", explicit=True)
    deliveries: list[tuple[str, int]] = []
    try:
        share.joined(worker)
        share.produce(broker, "deliveries", ["fine-1", "poison", "fine-2"])

        def verdict(m: Any) -> None:
            value = m.value().decode()
            deliveries.append((value, m.delivery_count()))
            worker.acknowledge(m, AcknowledgeType.RELEASE if value == "poison" else AcknowledgeType.ACCEPT)

        def figures() -> dict[str, int]:
            rows = re.findall(r"<tr><td>([\w :]+)</td><td>(\d+)</td></tr>", _table(get(broker, "/groups/poisoned")[2],
                                                                                "share-figures"))
            return {name: int(n) for name, n in rows}

        def archived() -> bool:
            share.poll_until(worker, lambda got: bool(got), seconds=2, on_message=verdict)
            worker.commit_sync()
            return figures().get("archived at the delivery limit") == 1

        wait_for(archived, 120, "the poison record archived at the delivery limit", seen=lambda: (figures(), deliveries))
        shown = figures()
        poison = [count for value, count in deliveries if value == "poison"]
        # Every delivery of the poison record after its first is a redelivery; the others came once.
        assert shown["redelivered"] == len(poison) - 1 >= 1, (shown, deliveries)
        assert sorted(v for v, _ in deliveries if v != "poison") == ["fine-1", "fine-2"]
        assert shown["in flight: acquired"] == 0 and shown["lock expiries"] == 0, shown
    finally:
        worker.close()


def test_a_streams_groups_page_shows_tasks_per_member_and_its_topology(broker_factory: Any) -> None:
    """Two members of a streams group (the word count's topology, driven over the protocol as the
    streams tests drive it), the second sending an older topology epoch than the group's: the page
    shows each member's active and standby tasks, the topology's epoch and its subtopologies once
    the broker has created the internal topics, and the second member as STALE_TOPOLOGY."""
    from kclient.wire_client import WireClient
    from tests.differential.streams_ops import Member, topology

    broker = broker_factory({"group.streams.num.standby.replicas": "1", "group.streams.initial.rebalance.delay.ms": "0",
                             "group.streams.session.timeout.ms": "60000"})
    group, source = "console-streams", "console-streams-in"
    create_topic(broker.bootstrap, source, 2)
    with WireClient("127.0.0.1", broker.port) as c:
        current, stale = Member(c, group, source, "a"), Member(c, group, source, "b")
        wait_for(lambda: bool(current.heartbeat() and current.active), 60, "the first member's tasks")
        # Joining with epoch 0 of the topology the group has at epoch 1: accepted, and stale.
        stale.heartbeat(topology=topology(group, source, epoch=0))

        def page() -> str:
            current.heartbeat()
            stale.heartbeat()
            return get(broker, f"/groups/{group}")[2]

        def settled(html: str) -> bool:
            members = _table(html, "members")
            return ("configured, 2 subtopologies" in html and members.count("STALE_TOPOLOGY") == 1
                    and len(re.findall(r"<td>[01]_[01](, [01]_[01])*</td>", members)) >= 3
                    and bool(current.standby or stale.standby))

        html = ""

        def seen() -> str:
            return html[:3000]

        def ready() -> bool:
            nonlocal html
            html = page()
            return settled(html)

        wait_for(ready, 60, "both members with tasks and standbys, the topology configured", seen=seen)
    assert "type <b>Streams</b>" in html and '<b class="topology-epoch">1</b>' in html
    assert "<th>active tasks</th><th>standby tasks</th><th>warm-up tasks</th><th>topology epoch</th>" in html
    subtopologies = _table(html, "subtopologies")
    assert f"<td>0</td><td>{source}</td>" in subtopologies
    assert f"<td>{group}-words-repartition</td>" in subtopologies and f"{group}-counts-changelog" in subtopologies
    assert "STALE_TOPOLOGY: 1 of 2 members" in html
    tasks = {f"{s.subtopology_id}_{p}" for m in (current, stale) for s in m.active for p in s.partitions}
    assert tasks == {"0_0", "0_1", "1_0", "1_1"}, tasks
    for task in tasks:
        assert task in _table(html, "members")


def test_a_share_groups_page_lists_the_locks_its_records_are_held_by(broker_factory: Any) -> None:
    """A share consumer holds three records without acknowledging them: the page lists each with
    its partition, offset, delivery count and when its lock expires; acknowledged, none is held."""
    from confluent_kafka import AcknowledgeType

    from tests.integration.helpers import share

    # Locks long enough that none expires while the test looks (each look is a page read).
    broker = broker_factory({**share.OVERRIDES, "group.share.record.lock.duration.ms": "60000"})
    share.make_topic(broker, "held")
    # Produced before the worker joins: its first fetch finds the three in the log, one batch, and
    # its poll brings them together (it holds them, unacknowledged, and may poll no more).
    share.produce(broker, "held", ["a", "b", "c"])
    worker = share.consumer(broker, "holding", "held", explicit=True)
    try:
        got = share.poll_holding(worker, lambda m: False, lambda got: len(got) >= 3, seconds=60)
        assert sorted(m.value().decode() for m in got) == ["a", "b", "c"]

        def held() -> list[tuple[str, str, str, str]]:
            return re.findall(r"<tr><td>(held-0)</td><td>(\d)</td><td>.*?</td><td>(\d+)</td><td>(\d+)</td></tr>",
                              _table(get(broker, "/groups/holding")[2], "held-locks"))

        wait_for(lambda: len(held()) == 3, 60, "the three held locks listed", seen=held)
        rows = held()
        assert sorted(offset for _, offset, _, _ in rows) == ["0", "1", "2"], rows
        assert all(deliveries == "1" and 0 <= int(expires) <= 60 for _, _, deliveries, expires in rows), rows
        assert "3 records held by members" in get(broker, "/groups/holding")[2]
        for m in got:
            worker.acknowledge(m, AcknowledgeType.ACCEPT)
        worker.commit_sync()
        wait_for(lambda: 'class="held-locks"' not in get(broker, "/groups/holding")[2], 60, "no lock held")
    finally:
        worker.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
def test_a_thousand_member_groups_page_shows_every_member_and_changes_live(broker_factory: Any) -> None:
    broker = broker_factory(BROKER_OVERRIDES)
    group = big_group(broker.bootstrap, 1000)
    driver = chromium()
    try:
        times = open_and_measure(driver, f"http://127.0.0.1:{broker.console_port}/groups/{BIG_GROUP}", group)
        assert rows(driver) == 1001 and len(set(group.members)) == 1001
        ids = set(driver.execute_script(
            "return Array.from(document.querySelectorAll('table.members tbody td:first-child'))"
            ".map(td => td.textContent)"))
        assert ids == set(group.members)
        assert driver.execute_script("return window.bigSeen") > 0
        # Timings are reported, never asserted (bench.console_cost --big-group measures them).
        print(f"1,000-member group page: response {times.response_ms:.0f} ms, DOMContentLoaded "
              f"{times.dom_ready_ms:.0f} ms, load {times.load_ms:.0f} ms, {times.html_bytes / 1024:.0f} KiB; "
              f"a live update (one more member) shown {times.update_ms:.0f} ms after it was asked for; "
              f"load average {os.getloadavg()[0]:.1f}")
    finally:
        driver.quit()
        group.close()
