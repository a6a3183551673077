"""One StreamsWordCount process (``tests/java/StreamsWordCount.java``) and what it last reported:
its state and its active and standby tasks."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from testkit.kafka import java_command


class Instance:
    """One StreamsWordCount process and what it last reported."""

    def __init__(self, classes: Path, libs: Path, bootstrap: str, app: str, topics: tuple[str, str],
                 state_dir: Path, log: Path, *options: str) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            java_command(libs, "StreamsWordCount", bootstrap, app, *topics, str(state_dir), *options,
                         classes=classes),
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.state = "CREATED"
        self.active: set[str] = set()
        self.standby: set[str] = set()
        self.errors: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["event"] == "tasks":
                self.state = event["state"]
                self.active, self.standby = set(event["active"]), set(event["standby"])
            elif event["event"] == "state":
                self.state = event["state"]
            else:
                self.errors.append(event)

    def running(self) -> bool:
        return self.state == "RUNNING" and self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.active, self.standby, self.state = set(), set(), "KILLED"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
