"""Clients of the session tests (KIP-368): Kafka's VerifiableProducer producing across several
session lifetimes, and how many re-authentications kcoord's log shows."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from testkit.kafka import run_tool
from testkit.kcoord import BrokerProcess


def reauthentications(process: BrokerProcess, mechanism: str) -> int:
    """How many re-authentications with ``mechanism`` kcoord's log shows so far."""
    return sum(1 for line in process.log().splitlines()
               if " sasl.authenticated " in line and f"mechanism={mechanism} " in line
               and "reauthentication=True" in line)


def verifiable_producer(libs: Path, bootstrap: str, topic: str, config: Path, records: int, per_second: int,
                        jvm: tuple[str, ...] = ()) -> dict[str, object]:
    """Kafka's VerifiableProducer sending ``records`` at ``per_second`` with the client properties
    of ``config``: its exit code, how many records it had acknowledged and the errors it reported."""
    done = run_tool(libs, "org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bootstrap,
                    "--topic", topic, "--max-messages", str(records), "--throughput", str(per_second),
                    "--command-config", str(config), timeout=180 + records / per_second, jvm=jvm)
    events = []
    for line in done.stdout.splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    names = [e.get("name") for e in events]
    return {"exit": done.returncode, "acked": names.count("producer_send_success"),
            "errors": sorted({str(e.get("exception")) for e in events if e.get("name") == "producer_send_error"})}
