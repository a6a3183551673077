"""Child processes that do not outlive the launcher. Each asks Linux (``PR_SET_PDEATHSIG``) for
SIGTERM when the launcher dies, even by SIGKILL, so its nodes hand over and its etcd stops instead
of running on as orphans. That signal follows the *thread* that started the child, so children are
started from the launcher's main thread (the trio thread, alive as long as the launcher), not from
a worker thread as ``trio.lowlevel.open_process`` does; their exit is awaited on a pidfd."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import trio

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with(parent: int) -> Callable[[], None] | None:
    """What the child runs between fork and exec: only a C call, nothing that takes a lock."""
    libc = _LIBC
    if libc is None:
        return None

    def ask() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the launcher died before the request was made
            os._exit(1)

    return ask


class ChildProcess:
    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def send_signal(self, signum: int) -> None:
        self.popen.send_signal(signum)  # a no-op once the child has been waited for

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        if self.popen.returncode is None:
            pidfd = os.pidfd_open(self.pid)
            try:
                await trio.lowlevel.wait_readable(pidfd)
            finally:
                os.close(pidfd)
        return self.popen.wait()  # it has exited: this only reaps it


def start(argv: list[str], output: Path | None) -> ChildProcess:
    """Starts ``argv`` in a session of its own (a Ctrl-C at a terminal reaches only the launcher),
    writing to ``output`` or else to the launcher's own stdout and stderr."""
    if output is None:
        return ChildProcess(subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True,
                                             preexec_fn=_die_with(os.getpid())))
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "ab") as log:
        return ChildProcess(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True, preexec_fn=_die_with(os.getpid())))
