"""A big group's page in a real headless Chromium: a consumer group (KIP-848) of many members
joined over the protocol from one connection (a member is one ConsumerGroupHeartbeat: no client
library, no thread or socket per member), its page opened, and what it took measured with the
browser's own Performance API: the page's load, and a live update (one more member joining) from
the moment it was asked for until the page showed it. Shared by the browser test (which asserts
what the page shows and prints the times) and ``bench.console_cost --big-group`` (which reports
them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from tests.integration.helpers.clients import create_topic, wait_for

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
BIG_GROUP, BIG_TOPIC, BIG_PARTITIONS = "console-big", "console-big-t", 200
# The members never heartbeat again after joining: a session long enough for the page's whole
# life keeps them in the group (the broker's default, 45 s, could expire them on a slow machine).
SESSION_MS = 600_000
BROKER_OVERRIDES = {"group.consumer.session.timeout.ms": str(SESSION_MS),
                    "group.consumer.max.session.timeout.ms": str(SESSION_MS)}
MEMBERS_ROWS = "table.members tbody tr"


class BigGroup:
    """Members of ``BIG_GROUP`` joined one ConsumerGroupHeartbeat each over one connection."""

    def __init__(self, host: str, port: int) -> None:
        self.client = WireClient(host, port, client_id="big-group", timeout=60)
        self.members: list[str] = []

    def join(self, count: int) -> None:
        """``count`` more members, pipelined in batches (each answered with its member id)."""
        batch = 100
        for start in range(0, count, batch):
            sent = [self.client.send(ApiKey.ConsumerGroupHeartbeat, 0, ConsumerGroupHeartbeatRequest(
                group_id=BIG_GROUP, member_id="", member_epoch=0, rebalance_timeout_ms=60_000,
                subscribed_topic_names=[BIG_TOPIC], topic_partitions=[]))
                for _ in range(min(batch, count - start))]
            for corr in sent:
                answer = self.client.recv(ApiKey.ConsumerGroupHeartbeat, 0, corr)
                assert answer.error_code == 0, answer
                self.members.append(answer.member_id)

    def close(self) -> None:
        self.client.close()


def big_group(bootstrap: str, members: int) -> BigGroup:
    create_topic(bootstrap, BIG_TOPIC, BIG_PARTITIONS)
    host, port = bootstrap.rsplit(":", 1)
    group = BigGroup(host, int(port))
    try:
        group.join(members)
    except BaseException:
        group.close()
        raise
    return group


def chromium() -> Any:
    """A headless Debian Chromium through its own driver (Selenium Manager neither looks for nor
    downloads one)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


@dataclass
class PageTimes:
    """From the browser's Performance API (ms): the navigation's response fully received, the
    document parsed (DOMContentLoaded) and loaded (the load event), from the navigation's start;
    and a live update, from asking for it until the page showed it. Bytes: the HTML's transfer size."""

    response_ms: float
    dom_ready_ms: float
    load_ms: float
    html_bytes: int
    update_ms: float


# Counts the member rows after every swap of <main>, and notes (performance.now()) when they first
# reach the number expected: the moment the page shows the change.
_WATCH = """
window.bigSeen = null;
window.bigWant = arguments[0];
new MutationObserver(function () {
  if (window.bigSeen === null && document.querySelectorAll(arguments[0]).length >= window.bigWant) {
    window.bigSeen = performance.now();
  }
}.bind(null, arguments[1])).observe(document.getElementById('live'), {attributes: true, attributeFilter: ['data-updates']});
return performance.now();
"""

_NAVIGATION = """
var n = performance.getEntriesByType('navigation')[0];
return [n.responseEnd, n.domContentLoadedEventEnd, n.loadEventEnd, n.transferSize || n.encodedBodySize || 0];
"""


def rows(driver: Any) -> int:
    return int(driver.execute_script(f"return document.querySelectorAll('{MEMBERS_ROWS}').length"))


def open_and_measure(driver: Any, url: str, group: BigGroup, timeout: float = 120) -> PageTimes:
    """Opens ``url`` (the big group's page), waits for it to show every member and its live stream
    to connect, then joins one more member and waits for the page to show it too."""
    driver.get(url)
    want = len(group.members)
    wait_for(lambda: rows(driver) == want, timeout, f"the page to show all {want} members", seen=lambda: rows(driver))
    wait_for(lambda: driver.execute_script("return document.getElementById('status').textContent") == "live",
             timeout, "the page's live stream to connect")
    wait_for(lambda: driver.execute_script("return document.readyState") == "complete", timeout, "the load event")
    response, dom_ready, load, size = driver.execute_script(_NAVIGATION)
    asked = float(driver.execute_script(_WATCH, want + 1, MEMBERS_ROWS))
    group.join(1)
    wait_for(lambda: driver.execute_script("return window.bigSeen") is not None, timeout,
             "the new member on the page", seen=lambda: rows(driver))
    seen = float(driver.execute_script("return window.bigSeen"))
    return PageTimes(float(response), float(dom_ready), float(load), int(size), seen - asked)
