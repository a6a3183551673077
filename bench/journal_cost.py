"""What the rebalance journal costs: the same work against a broker with `group.events.enable` on
and one with it off, in one run, rounds interleaved so both see the same machine.

    python -m bench.journal_cost [--members 100 500] [--rounds 5] [--heartbeat-seconds 3]

1. rebalance: N raw-protocol members form a group (N joins, one generation, every member holding
   its assignment): each join is a journal event, plus the phases and the summary;
   (wall time, and the broker's CPU time for it, steadier on a shared machine);
2. heartbeats: 50 members heartbeat back-to-back (a steady heartbeat writes no event: this shows
   the journal adds nothing to the hot path).
Prints medians, the on/off ratio and the runs.
"""

from __future__ import annotations

import argparse
import statistics

import trio

from bench.groups import formation, heartbeat_rate
from bench.harness import Broker


def report(what: str, on: list[float], off: list[float], unit: str, higher_is_better: bool = False) -> None:
    m_on, m_off = statistics.median(on), statistics.median(off)
    ratio = (m_off / m_on) if higher_is_better else (m_on / m_off)
    print(f"{what}: journal on {m_on:,.1f} {unit}, off {m_off:,.1f} {unit}: on/off cost x{ratio:.3f} "
          f"(runs on {', '.join(f'{v:,.0f}' for v in on)}; off {', '.join(f'{v:,.0f}' for v in off)})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, nargs="*", default=[100, 500])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeat-seconds", type=float, default=3.0)
    args = parser.parse_args()
    brokers = {"on": Broker(group_events_enable="true"), "off": Broker(group_events_enable="false")}
    try:
        for n in args.members:
            times: dict[str, list[float]] = {"on": [], "off": []}
            cpu: dict[str, list[float]] = {"on": [], "off": []}
            for round_no in range(args.rounds):
                order = ("on", "off") if round_no % 2 == 0 else ("off", "on")
                for name in order:
                    before = brokers[name].cpu()
                    times[name].append(trio.run(formation, brokers[name].port, n, round_no) * 1000)
                    cpu[name].append((brokers[name].cpu() - before) * 1000)
            report(f"rebalance, {n} members forming a group", times["on"], times["off"], "ms")
            # Broker CPU per rebalance: steadier than wall time on a shared machine.
            report(f"broker CPU per rebalance, {n} members", cpu["on"], cpu["off"], "ms")
            # The kernel counts CPU time in 10 ms ticks: over all rounds the ratio is finer.
            print(f"broker CPU, {n} members, all rounds: journal on {sum(cpu['on']):,.0f} ms, "
                  f"off {sum(cpu['off']):,.0f} ms: on/off x{sum(cpu['on']) / sum(cpu['off']):.3f}")
        rates: dict[str, list[float]] = {"on": [], "off": []}
        for round_no in range(args.rounds):
            order = ("on", "off") if round_no % 2 == 0 else ("off", "on")
            for name in order:
                b = brokers[name]
                rate, _, _ = trio.run(heartbeat_rate, b.port, 50, args.heartbeat_seconds, f"hb-{round_no}", b.cpu)
                rates[name].append(rate)
        report("heartbeats, 50 members back-to-back", rates["on"], rates["off"], "/s", higher_is_better=True)
    finally:
        for b in brokers.values():
            b.stop()


if __name__ == "__main__":
    main()
