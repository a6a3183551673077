"""The console's actions with real clients: a group's offsets reset from its page in a real headless
Chromium, and a confluent-kafka consumer of the group resuming where the reset put it; a user
without the ACL refused (403), an action without credentials (401) and bad input (400, 404, 409)
answered clearly, and nothing changed by any of them; a read-only console refusing every action."""

from __future__ import annotations

import base64
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AclOperation, AdminClient

from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import ThreadedConsumer, wait_for
from tests.integration.helpers.console import committed_offsets, first_offsets, group_acl, guarded_group

pytestmark = pytest.mark.timeout(240)

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
GROUP, TOPIC, PARTITIONS, RECORDS = "act-g", "act-t", 2, 10  # records per partition
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ACTIONS_ON = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # Only the group is guarded: resources no ACL names stay open, as the topics here.
    "allow.everyone.if.no.acl.found": "true",
    "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
    "console.actions.enable": "true",
}


def post(broker: BrokerProcess, action: str, fields: dict[str, str], user: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Status and body of a console action, posted as the console's form posts it."""
    request = urllib.request.Request(f"http://127.0.0.1:{broker.console_port}/actions/{action}",
                                     data=urllib.parse.urlencode(fields).encode(), method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
    if user is not None:
        token = base64.b64encode(f"{user}:{USERS.get(user, 'wrong')}".encode()).decode()
        request.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def committed(broker: BrokerProcess, group: str = GROUP) -> dict[tuple[str, int], int]:
    return committed_offsets(broker, group)


@pytest.fixture
def guarded(broker_factory: Any) -> Iterator[BrokerProcess]:
    """A broker whose group ``GROUP`` alice may read (commit its offsets) and bob may not, with the
    group's offsets committed at the end of both partitions and no member."""
    broker: BrokerProcess = broker_factory(ACTIONS_ON)
    guarded_group(broker, GROUP, TOPIC, PARTITIONS, RECORDS)
    yield broker


def test_refusals_change_nothing(guarded: BrokerProcess) -> None:
    broker = guarded
    before = committed(broker)
    earliest = {"group": GROUP, "to": "earliest"}
    status, body = post(broker, "reset-offsets", earliest)
    assert status == 401 and "Sign in" in body
    status, body = post(broker, "reset-offsets", earliest, user="mallory")  # wrong password, unknown user
    assert status == 401
    status, body = post(broker, "reset-offsets", earliest, user="bob")
    assert status == 403 and "User:bob may not" in body and "GROUP_AUTHORIZATION_FAILED" in body, body
    status, body = post(broker, "delete-group", {"group": GROUP}, user="bob")
    # Its first request, FindCoordinator, needs Describe on the group: refused before DeleteGroups.
    assert status == 403 and "FindCoordinator" in body and "GROUP_AUTHORIZATION_FAILED" in body, body
    # Alice may read the group (commit its offsets) but not delete it or its offsets.
    status, body = post(broker, "delete-group", {"group": GROUP}, user="alice")
    assert status == 403 and "DeleteGroups" in body, body
    status, body = post(broker, "delete-offsets", {"group": GROUP, "topic": TOPIC}, user="alice")
    assert status == 403 and "OffsetDelete" in body, body
    for fields, expected, says in [
        ({"group": GROUP, "to": "shift", "value": "ten"}, 400, "A shift is a whole number"),
        ({"group": GROUP, "to": "sideways"}, 400, "Reset to what?"),
        ({"group": GROUP, "to": "datetime", "value": "yesterday"}, 400, "Error parsing timestamp"),
        ({"group": GROUP, "to": "earliest", "topic": "a:b:c"}, 400, "Invalid topic arg"),
        ({"group": GROUP, "to": "earliest", "extra": "1"}, 400, "Unknown field"),
        ({"to": "earliest"}, 400, "The field &#x27;group&#x27; is required"),
        ({"group": "no-such-group", "to": "earliest"}, 404, "unknown to this cluster"),
    ]:
        status, body = post(broker, "reset-offsets", fields, user="alice")
        assert (status, says in body) == (expected, True), (fields, status, body[-600:])
    # A form of another site, sent by a browser with alice's credentials.
    status, body = post(broker, "reset-offsets", earliest, user="alice", headers={"Origin": "http://evil.example"})
    assert status == 403 and "another site" in body
    status, body = post(broker, "no-such-action", earliest, user="alice")
    assert status == 404
    # A group with a member: its offsets are not reset and it is not deleted (kcoord groups' checks).
    member = ThreadedConsumer(broker.bootstrap, GROUP, [TOPIC], **{"auto.offset.reset": "latest"})
    try:
        wait_for(lambda: len(member.held()) == PARTITIONS, 60, "the member to hold the topic")
        status, body = post(broker, "reset-offsets", earliest, user="alice")
        assert status == 409 and "can only be reset if the group" in body and "inactive" in body, body
    finally:
        member.close()
    assert committed(broker) == before
    assert broker.proc is not None and broker.proc.poll() is None


def test_a_read_only_console_refuses_every_action(broker: BrokerProcess) -> None:
    for action in ("reset-offsets", "delete-offsets", "delete-group"):
        status, body = post(broker, action, {"group": "g", "to": "earliest"}, user="alice")
        assert status == 403 and "read-only" in body, (action, status, body)
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.console_port}/groups", timeout=30) as resp:
        assert 'id="actions"' not in resp.read().decode()


def test_offsets_deleted_then_the_empty_group_deleted(guarded: BrokerProcess) -> None:
    broker = guarded
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_acls([group_acl(GROUP, "User:alice", AclOperation.DELETE)]).values():
        future.result(15)
    status, body = post(broker, "delete-offsets", {"group": GROUP, "topic": f"{TOPIC}:1"}, user="alice")
    assert status == 200 and "Request succeed for deleting offsets" in body, body
    assert committed(broker) == {(TOPIC, 0): RECORDS}
    status, body = post(broker, "delete-group", {"group": GROUP}, user="alice")
    assert status == 200 and "was successful" in body, body
    assert committed(broker) == {}


@pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
def test_offsets_reset_from_the_page_and_a_consumer_resumes_there(guarded: BrokerProcess) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    broker = guarded
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)

    def reset_by(user: str, shift: str) -> tuple[str, str]:
        """Signs in as ``user`` in a browser of its own, shifts the offsets from the group's page;
        the outcome's status and text."""
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        try:
            # The browser answers the sign-in's challenge with these and sends them with the forms.
            driver.get(f"http://{user}:{USERS[user]}@127.0.0.1:{broker.console_port}/login?next=/groups/{GROUP}")
            wait_for(lambda: bool(driver.find_elements(By.CSS_SELECTOR, "form#reset-offsets")), 30,
                     "the group's page with its actions")
            form = driver.find_element(By.CSS_SELECTOR, "form#reset-offsets")
            shots = os.environ.get("KCOORD_CONSOLE_SCREENSHOTS")
            if shots and user == "alice":  # docs/console.md's picture of a group's actions
                driver.set_window_size(1100, 700)
                driver.execute_script("document.getElementById('actions').scrollIntoView()")
                driver.save_screenshot(os.path.join(shots, "console-actions.png"))
            Select(form.find_element(By.NAME, "to")).select_by_value("shift")
            form.find_element(By.NAME, "value").send_keys(shift)
            form.find_element(By.TAG_NAME, "button").click()
            wait_for(lambda: bool(driver.find_elements(By.ID, "outcome")), 60, "the action's outcome")
            outcome = driver.find_element(By.ID, "outcome")
            status = str(outcome.get_attribute("data-status"))
            if shots and status == "200":  # docs/console.md's picture of an action's outcome
                driver.set_window_size(1100, 700)
                driver.save_screenshot(os.path.join(shots, "console-action.png"))
            return status, driver.find_element(By.TAG_NAME, "main").text
        finally:
            driver.quit()

    status, text = reset_by("bob", "-4")
    assert status == "403" and "User:bob may not" in text, text
    assert committed(broker) == {(TOPIC, p): RECORDS for p in range(PARTITIONS)}
    status, text = reset_by("alice", "-4")
    assert status == "200" and f"{TOPIC}" in text and "6" in text, text
    assert committed(broker) == {(TOPIC, p): RECORDS - 4 for p in range(PARTITIONS)}
    # A real consumer of the group resumes at the new offsets ("latest" would skip them if it did not).
    consumer = ThreadedConsumer(broker.bootstrap, GROUP, [TOPIC], **{"auto.offset.reset": "latest"})
    try:
        wait_for(lambda: len(first_offsets(consumer)) == PARTITIONS and len(consumer.messages) >= 8, 60,
                 "the consumer to read what the reset put back", seen=lambda: first_offsets(consumer))
        assert first_offsets(consumer) == {p: RECORDS - 4 for p in range(PARTITIONS)}
    finally:
        consumer.close()
