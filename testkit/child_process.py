"""A client library's handle in a process of its own, so that a handle wedged inside its C library
stops only that process, and the parent can show where it is and end it.

Why: librdkafka can block inside the library past every timeout it was given (a lock-order
inversion, confluentinc/librdkafka#5476; a transactional call that never returns), and
confluent-kafka waits for a handle's lock in several calls *while holding the interpreter*. In the
test's or the runner's own process, such a call freezes every thread of it, and neither
pytest-timeout (which interrupts from Python) nor a watchdog thread can end it.

The protocol: the child writes JSON lines on its stdout and reads lines on its stdin; it dies with
its parent (Linux's parent-death signal) and dumps its Python stacks on its stderr on SIGUSR1. The
parent follows its lines on a thread of its own, and when the child is wedged takes its Python and
native stacks (gdb, when installed) before killing it.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
Message = dict[str, Any]


# ---- the child's side --------------------------------------------------------------------------


def child_setup() -> None:
    """What every child does first: SIGKILL when its parent goes (a child wedged in a C library
    ends with the run), and its Python stacks on stderr on SIGUSR1."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    faulthandler.register(signal.SIGUSR1, all_threads=True)


class LineWriter:
    """The child's end of the pipe: one JSON line per message, flushed at once (the parent follows
    the child live), from any thread."""

    def __init__(self, out: IO[bytes] | None = None) -> None:
        self.out = out if out is not None else sys.stdout.buffer
        self.lock = threading.Lock()

    def write(self, message: Message) -> None:
        line = json.dumps(message).encode() + b"\n"
        with self.lock:
            self.out.write(line)
            self.out.flush()


# ---- the parent's side -------------------------------------------------------------------------


class ChildProcess:
    """``python -m module *args`` with the protocol above: each JSON line it writes goes to
    ``on_message`` (on the reader thread), and its exit code to ``on_exit`` once its stdout ends.
    ``stderr``: where its stderr (library logs, Python stacks) goes; the parent's own by default."""

    def __init__(self, module: str, args: list[str], on_message: Callable[[Message], None],
                 on_exit: Callable[[int], None] | None = None, stderr: IO[Any] | None = None,
                 name: str = "child") -> None:
        self.command = [sys.executable, "-m", module, *args]
        self.on_message = on_message
        self.on_exit = on_exit
        self.stderr = stderr
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.reader: threading.Thread | None = None

    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)
        self.reader = threading.Thread(target=self._read, daemon=True, name=f"{self.name}-pipe")
        self.reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not one of its messages (a library writing on stdout)
            self.on_message(message)
        code = self.proc.wait()
        if self.on_exit is not None:
            self.on_exit(code)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, line: str) -> None:
        """One line on the child's stdin (nothing when it is gone)."""
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.write(line.encode() + b"\n")
                self.proc.stdin.flush()

    def close_stdin(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()

    def join(self, timeout: float) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(max(0.0, timeout))
        if self.reader is not None and not self.is_alive():
            self.reader.join(5)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.reader is not None:
            self.reader.join(5)

    def stacks(self) -> str:
        """Where the child's threads are: its Python stacks (faulthandler, on its stderr) and, with
        gdb installed, its native ones (returned)."""
        if not self.is_alive() or self.proc is None:
            return ""
        os.kill(self.proc.pid, signal.SIGUSR1)
        time.sleep(1.0)  # faulthandler writes from the signal handler, the interpreter held or not
        if shutil.which("gdb") is None:
            return ""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex", "thread apply all bt"],
                                  capture_output=True, text=True, timeout=60)
            return "\n".join(line for line in done.stdout.splitlines() if line.startswith(("#", "Thread ")))
        return ""
