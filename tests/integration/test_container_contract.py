"""The broker image's contract, run as a plain process: the Dockerfile's ENTRYPOINT + CMD with the
image's environment (only the data dir and addresses swapped for test ones) serves Kafka and
metrics, its HEALTHCHECK passes within the start period, and SIGTERM - what `docker stop` sends
to PID 1 - ends it with exit 0 within 5 s, everything acknowledged on disk."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.configs.node_config import PROPERTIES
from broker.coordinators.group.core.base.partitioning import partition_for
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from testkit.kcoord import ROOT
from testkit.ports import api_versions_ok, free_port
from tests.integration.helpers.clients import create_topic, wait_for

pytestmark = pytest.mark.timeout(180)

VENV_BIN = Path(sys.prefix) / "bin"
# Where the image's venv lives; its bin dir maps onto this environment's.
IMAGE_VENV_BIN = "/opt/kcoord/bin"
STOP_SECONDS = 5.0


@dataclass
class BrokerImage:
    """What the Dockerfile's broker stage says a container runs."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    exposed: set[int]
    healthcheck: list[str]
    health_options: dict[str, str]


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", text)
    assert match, f"duration {text!r}"
    return float(match[1]) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match[2]]


def _exec_form(value: str, what: str) -> list[str]:
    # Shell form would run `sh -c`, which does not pass SIGTERM on to kcoord.
    argv = json.loads(value)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), f"{what} must be exec form: {value}"
    return argv


def read_broker_image() -> BrokerImage:
    from dockerfile_parse import DockerfileParser
    from dockerfile_parse.util import extract_key_values

    parser = DockerfileParser(path=str(ROOT / "Dockerfile"))
    stages: dict[str, list[dict[str, str]]] = {}
    parents: dict[str, str] = {}
    current = ""
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            words = instruction["value"].split()
            current = words[-1] if len(words) >= 3 and words[-2].upper() == "AS" else f"stage{len(stages)}"
            parents[current] = words[0]
            stages[current] = []
        elif current:
            stages[current].append(instruction)
    final = list(stages)[-1]

    chain = [final]
    while parents[chain[-1]] in stages:
        chain.append(parents[chain[-1]])
    env: dict[str, str] = {}
    exposed: set[int] = set()
    for stage in reversed(chain):  # ENV and EXPOSE are inherited from the stage built upon
        for ins in stages[stage]:
            if ins["instruction"] == "ENV":
                env.update(extract_key_values(env_replace=False, args={}, envs={}, instruction_value=ins["value"]))
            elif ins["instruction"] == "EXPOSE":
                exposed |= {int(p.split("/")[0]) for p in ins["value"].split()}

    def last(name: str) -> str:
        values = [i["value"] for i in stages[final] if i["instruction"] == name]
        assert values, f"the {final} stage has no {name}"
        return values[-1]

    options_text, _, command = last("HEALTHCHECK").partition(" CMD ")
    options = dict(opt.removeprefix("--").split("=", 1) for opt in shlex.split(options_text))
    return BrokerImage(_exec_form(last("ENTRYPOINT"), "ENTRYPOINT"), _exec_form(last("CMD"), "CMD"), env, exposed,
                       _exec_form(command.strip(), "HEALTHCHECK CMD"), options)


def _port_of(url: str) -> int:
    port = urlsplit(url if "://" in url else "http://" + url).port
    assert port is not None, url
    return port


@dataclass
class Container:
    """The image's command running as a child process in a temp "container" directory."""

    image: BrokerImage
    env: dict[str, str]
    home: Path
    data_dir: Path
    port: int
    metrics_port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.image.entrypoint + self.image.cmd, env=self.env, cwd=self.home,
                                         stdout=log, stderr=subprocess.STDOUT)
        proc = self.proc

        def serving() -> bool:
            assert proc.poll() is None, f"exited with {proc.returncode}:\n{self.log()}"
            return api_versions_ok(self.port)

        wait_for(serving, 120, "an answer to ApiVersions", seen=lambda: self.log()[-3000:])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def healthcheck(self) -> subprocess.CompletedProcess[str]:
        """The HEALTHCHECK command as Docker runs it: inside the container, with its env."""
        image_port = _port_of(self.image.env["KCOORD_LISTENERS"])
        argv = [re.sub(rf":{image_port}$", f":{self.port}", arg) for arg in self.image.healthcheck]
        timeout = _seconds(self.image.health_options.get("timeout", "30s"))
        try:
            return subprocess.run(argv, env=self.env, cwd=self.home, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:  # Docker counts it a failed check, and checks again
            return subprocess.CompletedProcess(argv, 1, "", f"the check outlasted its {timeout:.0f} s timeout")

    def stop(self) -> tuple[int, float]:
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running {STOP_SECONDS}s after SIGTERM:\n{self.log()}") from None
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    pytest.importorskip("dockerfile_parse")
    if not (VENV_BIN / "kcoord").exists():
        pytest.skip("kcoord is not installed in this environment (pip install -e .)")
    image = read_broker_image()
    home = tmp_path / "home"
    home.mkdir()
    data_dir = tmp_path / "data"
    port, metrics_port = free_port(), free_port()

    # The image's env, nothing inherited from the test run: only the data dir and the addresses
    # (loopback, free ports) are swapped, and the image's venv maps onto this one.
    env = dict(image.env)
    for swapped in ("KCOORD_LOG_DIRS", "KCOORD_LISTENERS", "KCOORD_ADVERTISED_LISTENERS"):
        assert swapped in env, f"the image sets no {swapped}"
    env["KCOORD_LOG_DIRS"] = str(data_dir)
    env["KCOORD_LISTENERS"] = f"PLAINTEXT://127.0.0.1:{port}"
    env["KCOORD_ADVERTISED_LISTENERS"] = f"PLAINTEXT://127.0.0.1:{port}"
    env["KCOORD_METRICS_LISTENER"] = f"http://127.0.0.1:{metrics_port}"
    assert env["PATH"].startswith(IMAGE_VENV_BIN + ":"), "the image puts its venv first on PATH"
    env["PATH"] = env["PATH"].replace(IMAGE_VENV_BIN, str(VENV_BIN)).replace("$PATH", os.environ.get("PATH", ""))
    env["HOME"] = str(home)  # Docker sets HOME from the image's USER

    c = Container(image, env, home, data_dir, port, metrics_port, tmp_path / "container.log")
    yield c
    c.kill()


def test_image_ports_are_the_brokers_defaults() -> None:
    """`docker run -p 9092:9092 -p 9464:9464` reaches the broker because the image listens where it exposes."""
    pytest.importorskip("dockerfile_parse")
    image = read_broker_image()
    defaults = {p.name: p.default for p in PROPERTIES}
    # The default metrics.listener follows the listener's host; the image names 0.0.0.0 itself so
    # that a published port reaches the metrics whatever the broker listens on.
    assert image.env["KCOORD_METRICS_LISTENER"] == "http://0.0.0.0:9464"
    assert _port_of(str(defaults["metrics.listener"])) == 9464
    assert image.exposed == {_port_of(image.env["KCOORD_LISTENERS"]), _port_of(image.env["KCOORD_METRICS_LISTENER"])}
    assert image.entrypoint + image.cmd == ["kcoord", "serve"]


def test_container_command_serves_reports_health_and_stops_cleanly(container: Container) -> None:
    c = container
    kcoord = subprocess.run(["sh", "-c", "command -v kcoord"], env=c.env, capture_output=True, text=True,
                            check=True).stdout.strip()
    assert kcoord == str(VENV_BIN / "kcoord")
    c.start()

    with WireClient("127.0.0.1", c.port) as client:
        versions = client.call(ApiKey.ApiVersions, 3, ApiVersionsRequest(client_software_name="contract",
                                                                         client_software_version="1"))
    assert versions.error_code == 0
    assert {ApiKey.OffsetCommit, ApiKey.JoinGroup, ApiKey.FindCoordinator} <= {k.api_key for k in versions.api_keys}

    with urllib.request.urlopen(f"http://127.0.0.1:{c.metrics_port}/metrics", timeout=5) as response:
        assert response.status == 200
        metrics = response.read().decode()
    # At least this request (a client of another test that outlived its broker may retry here too).
    counted = re.search(r'^kcoord_requests_total\{api="ApiVersions",version="3"\} (\S+)$', metrics, re.M)
    assert counted is not None and float(counted.group(1)) >= 1.0
    assert "process_resident_memory_bytes" in metrics

    # The check passes once the broker serves. How soon (within Docker's --start-period) depends on
    # how loaded the machine is: a Python command starts in seconds on a busy 2-core machine.
    checks = [c.healthcheck()]

    def healthy() -> bool:
        if checks[-1].returncode == 0:
            return True
        checks.append(c.healthcheck())
        return False

    wait_for(healthy, 120, "the health check to pass", step=0.2,
             seen=lambda: f"{checks[-1].stdout}{checks[-1].stderr}")
    assert checks[-1].stdout.startswith("healthy:")

    group, topic = "contract-group", "contract-topic"
    create_topic(f"127.0.0.1:{c.port}", topic, 1)
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{c.port}", "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    finally:
        consumer.close()

    code, took = c.stop()
    assert code == 0, c.log()
    assert took < STOP_SECONDS
    assert re.search(r"broker\.stopping signal=SIGTERM", c.log())
    assert "broker.stopped" in c.log()

    # The acknowledged commit is in the segment, as Kafka's dump tool would show it.
    dump = subprocess.run(["kcoord", "dump-log", "--json", str(c.data_dir / f"__consumer_offsets-{partition_for(group)}")],
                          env=c.env, cwd=c.home, capture_output=True, text=True, timeout=60, check=True)
    records = [r for line in dump.stdout.splitlines() for r in json.loads(line).get("records", [])]
    commits = [r["payload"]["data"]["offset"] for r in records
               if r["key"] and r["key"]["data"] == {"group": group, "topic": topic, "partition": 0} and r["payload"]]
    assert commits == [42]

    # A restart after the graceful stop finds a clean log and the commit.
    c.start()
    assert "log.recovered" not in c.log()
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{c.port}", "group.id": group})
    try:
        (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=15)
    finally:
        consumer.close()
    assert committed.offset == 42
    code, _ = c.stop()
    assert code == 0
