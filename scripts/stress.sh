#!/usr/bin/env bash
# Runs chosen tests N times, optionally beside busy-loop CPU hogs, and reports every failure with
# its test id and run number and the wall time of each run; every run is bounded by a timeout.
# Default: the integration and differential tiers, 3 runs, no hogs. Other arguments go to pytest.
#   bash scripts/stress.sh --runs 5 --hogs 2 tests/integration/test_cluster.py -k failover
# See docs/testing.md. Exit code 0 when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "test,analysis"
# Apache Kafka for the differential tests, as scripts/test.sh finds it (required once fetched).
if kafka_libs=$(scripts/kafka.sh); then
  export KCOORD_KAFKA_LIBS="$kafka_libs" KCOORD_REQUIRE_KAFKA=1
else
  echo "note: could not fetch Apache Kafka through Maven; the tests that need it will be skipped"
fi
exec .venv/bin/python -m testkit.stress "$@"
