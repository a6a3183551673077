"""`kcoord serve` under cProfile, for bench.request_cost: SIGUSR2 starts counting, SIGUSR1 stops and
writes the statistics to $BENCH_PROFILE_OUT. Run as a file (``python bench/profiled_serve.py
serve ...``) with the measured checkout first on PYTHONPATH, so that its kcoord is the one run."""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from types import FrameType

profile = cProfile.Profile()


def _start(signum: int, frame: FrameType | None) -> None:
    profile.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    profile.disable()
    profile.dump_stats(os.environ["BENCH_PROFILE_OUT"])


signal.signal(signal.SIGUSR2, _start)
signal.signal(signal.SIGUSR1, _stop)

from kcoord.cli import main  # noqa: E402  (after the handlers: a signal may come at any time)

sys.exit(main())
