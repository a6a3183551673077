"""A broker app built in memory, for the tests of its API table."""

from __future__ import annotations

from pathlib import Path

from broker.app import BrokerApp
from broker.configs.node_config import BrokerConfig


def make_app(tmp_path: Path, *overrides: str) -> BrokerApp:
    config = BrokerConfig.load(overrides=[f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0",
                                          *overrides], environ={})
    return BrokerApp(config)


