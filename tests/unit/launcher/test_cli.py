"""The `kcoord` command's parser: every subcommand for a person asking, the broker's alone for the
broker's own process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kcoord.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]

_SERVE = """
import contextlib, io, sys
from kcoord.cli import main
# The command line as `kcoord serve --help` gives it: parsed, answered, nothing served.
with contextlib.redirect_stdout(io.StringIO()) as usage, contextlib.suppress(SystemExit):
    main(["serve", "--help"])
loaded = sorted(m for m in ("kclient", "doctor", "analytics") if m in sys.modules)
print(usage.getvalue().split()[1:3], ",".join(loaded) or "-")
"""


def test_the_whole_command_lists_every_subcommand() -> None:
    usage = build_parser().format_usage()
    for name in ("serve", "health", "dump-log", "groups", "analyze", "config"):
        assert name in usage, usage
    assert build_parser().parse_args(["groups", "--bootstrap-server", "127.0.0.1:9092", "--list"]).command == "groups"


def test_serving_loads_none_of_the_client_tools() -> None:
    """A fresh process (this one has imported them already)."""
    done = subprocess.run([sys.executable, "-c", _SERVE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['kcoord',", "'serve']", "-"], done.stdout
