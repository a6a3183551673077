"""What a watched console costs the request path: ``bench.members`` and ``bench.commits`` with the
console off (``console.listener`` empty), A/B against the console on with a headless Chromium
(Debian's ``chromium`` and ``chromium-driver``, driven by Selenium) open on the busiest group's
page, its live stream following the group, interleaved in one run (off, on, then on, off, ...).

    python -m bench.console_cost [--rounds 3] [--members 2000] [--seconds 20] [--warmup 15]
        [--commit-seconds 5]
    python -m bench.console_cost --big-group [--rounds 5] [--big-members 1000]

bench.members' groups are all alike (ten members each): the page is the first group's. bench.commits'
busiest groups are its members' groups, whose offsets move all the time: the page is the first's,
and it changes at every read of the console (each half second). In both, the browser opens the page
as soon as the group exists, and nothing is counted before its live stream is connected; a line per
run says how often the page was found live (one look a second) and how many live updates it took. Prints each run, then per figure the median of each arm and
the ratio on/off, with the broker's CPU, and the load average the runs saw: on a shared machine the
rounds of one arm spread more than 3 %, and a ratio inside that spread says nothing.

``--big-group`` measures instead the page of one big group (a consumer group of ``--big-members``
members joined over the protocol, ``tests/integration/helpers/console_big.py``) in a headless
Chromium, with the browser's Performance API: per round a fresh load of the page (response,
DOMContentLoaded and load event, from the navigation's start, once every member is shown), then one
more member joining and the time until the page, live, shows it; medians and ranges over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench import commits, members
from bench.harness import Broker
from testkit.ports import free_port
from tests.integration.helpers.console_big import CHROMEDRIVER, CHROMIUM, chromium

MEMBERS_GROUP = "mb-0"
LOOK_S = 1.0
COMMITS_GROUP = "bench-members-0"


def _page_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Watcher:
    """A headless Chromium that opens ``url`` once the console serves it (the group exists), in a
    thread of its own, and keeps it open until ``close``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.driver: Any = None
        self.opened_at = 0.0
        self.error = ""
        # Looks at the page every LOOK_S while it is open: how many found its stream connected,
        # and the live updates it had taken by the last.
        self.looks = 0
        self.live_looks = 0
        self.updates = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._open, daemon=True)
        self.thread.start()

    def _open(self) -> None:
        while not self.stopping.is_set() and not _page_ready(self.url):
            self.stopping.wait(0.5)
        if self.stopping.is_set():
            return
        try:
            self.driver = chromium()
            self.driver.get(self.url)
            self.opened_at = time.perf_counter()
            while not self.stopping.wait(LOOK_S):
                status, updates = self.driver.execute_script(
                    "return [document.getElementById('status').textContent, "
                    "document.getElementById('live').dataset.updates || '0'];")
                self.looks += 1
                self.live_looks += status == "live"
                self.updates = max(self.updates, int(updates))
        except Exception as exc:  # reported with the figures, not a crash of the bench
            self.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(60)
        if self.driver is not None:
            self.driver.quit()


@contextmanager
def watching(port: int | None, group: str) -> Iterator[Watcher | None]:
    watcher = None if port is None else Watcher(f"http://127.0.0.1:{port}/groups/{group}")
    try:
        yield watcher
    finally:
        if watcher is not None:
            watcher.close()


def _say_live(watcher: Watcher | None, since: float) -> str:
    if watcher is None:
        return "console off"
    if watcher.error:
        return f"browser failed: {watcher.error}"
    opened = f"opened {watcher.opened_at - since:.0f}s after the start" if watcher.opened_at else "never opened"
    return (f"page {opened}, live at {watcher.live_looks} of {watcher.looks} looks (one a second), "
            f"{watcher.updates} live updates")


def members_run(console: bool, args: argparse.Namespace) -> dict[str, float]:
    port = free_port() if console else None
    listener = f"http://127.0.0.1:{port}" if port else ""
    start = time.perf_counter()
    with watching(port, MEMBERS_GROUP) as watcher:
        r = members.run(args.members, args.seconds, args.warmup, "sync", None, args.wave, args.seed,
                        overrides={"console.listener": listener},
                        ready=None if watcher is None else lambda: bool(watcher.live_looks or watcher.error))
    said = _say_live(watcher, start)
    print(f"  members, console {'on ' if console else 'off'}: heartbeat p50 {r['heartbeat_p50_ms']:.2f} "
          f"p99 {r['heartbeat_p99_ms']:.2f} ms, commit p50 {r['commit_p50_ms']:.2f} p99 {r['commit_p99_ms']:.2f} ms, "
          f"{r['requests_per_s']:,.0f} req/s, broker {r['broker_cores']:.3f} cores, "
          f"{r['broker_cpu_us_per_request']:.0f} us CPU/request, spurious {r['spurious_rebalances']}; "
          f"{said}; load {os.getloadavg()[0]:.1f}", flush=True)
    return {"heartbeat p50 ms": r["heartbeat_p50_ms"], "heartbeat p99 ms": r["heartbeat_p99_ms"],
            "commit p50 ms": r["commit_p50_ms"], "commit p99 ms": r["commit_p99_ms"],
            "req/s": r["requests_per_s"], "broker cores": r["broker_cores"],
            "broker us CPU/request": r["broker_cpu_us_per_request"]}


def commits_run(console: bool, args: argparse.Namespace) -> dict[str, float]:
    port = free_port() if console else None
    start = time.perf_counter()
    broker = Broker(log_flush_policy="sync", console_listener=f"http://127.0.0.1:{port}" if port else "")
    out: dict[str, float] = {}
    try:
        cases = commits.prepare(broker)
        with watching(port, COMMITS_GROUP) as watcher:
            if watcher is not None:
                deadline = time.perf_counter() + 120
                while not watcher.live_looks and not watcher.error and time.perf_counter() < deadline:
                    time.sleep(0.5)
            for name, committers, in_flight in cases:
                r = commits.run_case(broker, committers, in_flight, args.commit_seconds)
                short = "one in flight" if in_flight == 1 else name.split(",")[0]
                out.update({f"{short} req/s": r["req/s"], f"{short} p50 ms": r["p50 ms"],
                            f"{short} p99 ms": r["p99 ms"], f"{short} broker cores": r["broker cores"]})
    finally:
        broker.stop()
    said = _say_live(watcher, start)
    print(f"  commits, console {'on ' if console else 'off'}: " + ", ".join(
        f"{k} {v:,.2f}" if "ms" in k or "cores" in k else f"{k} {v:,.0f}" for k, v in out.items())
        + f"; {said}; load {os.getloadavg()[0]:.1f}", flush=True)
    return out


def _summary(name: str, off: list[dict[str, float]], on: list[dict[str, float]]) -> None:
    print(f"{name}: medians over {len(off)} rounds (console off | on with a browser | on/off)")
    for key in off[0]:
        a, b = statistics.median(r[key] for r in off), statistics.median(r[key] for r in on)
        spread = (max(r[key] for r in off) - min(r[key] for r in off)) / a * 100 if a else float("nan")
        print(f"  {key:34} {a:12,.3f} | {b:12,.3f} | {b / a if a else float('nan'):6.3f}   "
              f"(off's own spread {spread:.0f} %)", flush=True)


def big_group_run(args: argparse.Namespace) -> None:
    from tests.integration.helpers.console_big import BIG_GROUP, BROKER_OVERRIDES, big_group, open_and_measure

    port = free_port()
    overrides: dict[str, Any] = {k.replace(".", "_"): v for k, v in BROKER_OVERRIDES.items()}
    broker = Broker(console_listener=f"http://127.0.0.1:{port}", **overrides)
    try:
        started = time.perf_counter()
        group = big_group(broker.bootstrap, args.big_members)
        print(f"{args.big_members} members joined in {time.perf_counter() - started:.1f} s; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        driver = chromium()
        figures: dict[str, list[float]] = {"response ms": [], "DOMContentLoaded ms": [], "load ms": [],
                                           "live update ms": [], "HTML KiB": []}
        try:
            for i in range(args.rounds):
                members = len(group.members)
                t = open_and_measure(driver, f"http://127.0.0.1:{port}/groups/{BIG_GROUP}", group)
                for key, value in (("response ms", t.response_ms), ("DOMContentLoaded ms", t.dom_ready_ms),
                                   ("load ms", t.load_ms), ("live update ms", t.update_ms),
                                   ("HTML KiB", t.html_bytes / 1024)):
                    figures[key].append(value)
                print(f"  round {i + 1}, {members} members: response {t.response_ms:.0f} ms, DOMContentLoaded "
                      f"{t.dom_ready_ms:.0f} ms, load {t.load_ms:.0f} ms, {t.html_bytes / 1024:.0f} KiB, "
                      f"live update {t.update_ms:.0f} ms; load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            driver.quit()
            group.close()
    finally:
        broker.stop()
    print(f"big group page: medians (min-max) over {args.rounds} rounds")
    for key, values in figures.items():
        print(f"  {key:22} {statistics.median(values):10,.0f}   ({min(values):,.0f}-{max(values):,.0f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="A/B pairs, interleaved")
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=20.0, help="bench.members' measuring window")
    parser.add_argument("--warmup", type=float, default=15.0, help="bench.members' steady load before the window")
    parser.add_argument("--wave", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--commit-seconds", type=float, default=5.0, help="each bench.commits case")
    parser.add_argument("--big-group", action="store_true",
                        help="measure one big group's page in the browser instead of the A/B")
    parser.add_argument("--big-members", type=int, default=1000)
    args = parser.parse_args()
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    if args.big_group:
        print(f"load average at the start: {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
        big_group_run(args)
        print(f"load average at the end: {os.getloadavg()}", flush=True)
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.members + 512
    if soft < need and (hard == resource.RLIM_INFINITY or hard >= need):
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    runs: dict[str, dict[bool, list[dict[str, float]]]] = {"bench.members": {False: [], True: []},
                                                           "bench.commits": {False: [], True: []}}
    benches: dict[str, Callable[[bool, argparse.Namespace], dict[str, float]]] = {
        "bench.members": members_run, "bench.commits": commits_run}
    print(f"load average at the start: {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    for i in range(args.rounds):
        # off, on, then on, off: neither arm always runs first.
        for console in ((False, True) if i % 2 == 0 else (True, False)):
            for name, bench in benches.items():
                runs[name][console].append(bench(console, args))
    for name, arms in runs.items():
        _summary(name, arms[False], arms[True])
    print(f"load average at the end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
