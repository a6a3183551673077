#!/usr/bin/env bash
# Sets up kcoord and runs the broker on 127.0.0.1:9092 with its data in ./.kcoord-data.
# Extra arguments go to `kcoord serve` (e.g. --override group.initial.rebalance.delay.ms=0).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/kcoord serve "$@"
