"""Kafka 4.4's own ``kafka-broker-api-versions`` (``org.apache.kafka.tools.BrokerApiVersionsCommand``)
against Apache Kafka 4.4 and kcoord, as a user compares two brokers: for every API Kafka serves to
clients, kcoord serves at least Kafka's highest version, and the tool can use the same version with
both. The APIs left aside are the ones no client sends: KRaft's voter and controller APIs and the
inter-broker ones (transaction markers, share-group state), which kcoord's nodes do not exchange
with Kafka's. The feature levels the same brokers advertise are compared in test_topology.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from testkit.kafka import run_tool
from testkit.kcoord import BrokerProcess
from tests.differential.harness import Pair

pytestmark = pytest.mark.differential
TOOL = "org.apache.kafka.tools.BrokerApiVersionsCommand"

# Sent by brokers and controllers to one another, never by a client (Kafka's ApiMessageType
# listeners without "broker"-facing clients, or kcoord's nodes' own inter-node path).
NOT_CLIENT_APIS = {
    27,  # WriteTxnMarkers: the transaction coordinator to partition leaders
    80, 81, 94,  # AddRaftVoter, RemoveRaftVoter, UnregisterController: KRaft's quorum
    83, 84, 85, 86, 87,  # Initialize/Read/Write/Delete/ReadSummary ShareGroupState: broker to share coordinator
}

# "  Produce(0): 0 to 13 [usable: 13]," / "  ListPartitionReassignments(46): 0 [usable: 0]," /
# "  WriteTxnMarkers(27): UNSUPPORTED,"
LINE = re.compile(r"^\s*(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: (\d+)\]|UNSUPPORTED)")


def versions(libs: Path, bootstrap: str) -> dict[int, tuple[str, int | None, int | None]]:
    """What the tool prints for the one broker of ``bootstrap``: by API key, its name, the highest
    version the broker serves and the one the tool would use (None: unsupported)."""
    done = run_tool(libs, TOOL, "--bootstrap-server", bootstrap, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" -> (") == 1, done.stdout  # one broker
    found: dict[int, tuple[str, int | None, int | None]] = {}
    for line in done.stdout.splitlines():
        m = LINE.match(line)
        if m:
            name, key, low, high, usable = m.groups()
            top = None if low is None else int(high if high is not None else low)
            found[int(key)] = (name, top, None if usable is None else int(usable))
    assert found, done.stdout
    return found


def test_kcoord_serves_every_client_api_at_kafkas_highest_version(pair: Pair, kafka: Any,
                                                                   kcoord: BrokerProcess) -> None:
    theirs = versions(kafka.libs, kafka.bootstrap)
    ours = versions(kafka.libs, kcoord.bootstrap)
    client_apis = {key: v for key, v in theirs.items() if v[1] is not None and key not in NOT_CLIENT_APIS}
    assert len(client_apis) > 60, theirs  # the tool really listed Kafka's APIs
    behind = {}
    for key, (name, top, _usable) in client_apis.items():
        mine = ours.get(key, (name, None, None))[1]
        if mine is None or top is None or mine < top:
            behind[f"{name}({key})"] = {"kafka": top, "kcoord": mine}
    assert not behind, f"kcoord serves below Kafka 4.4: {behind}"
    # The version the tool itself would use is the same with both brokers.
    usable = {key: (theirs[key][2], ours[key][2]) for key in client_apis if theirs[key][2] != ours[key][2]}
    assert not usable, usable
    # What kcoord lists beyond Kafka is what test_api_versions.py's KCOORD_ONLY names.
    assert {key for key, v in ours.items() if v[1] is not None} - {key for key, v in theirs.items()
                                                                    if v[1] is not None} == {71, 72}
