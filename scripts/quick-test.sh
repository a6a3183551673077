#!/usr/bin/env bash
# The quick tier: the unit and property tests (markers unit, property), which start no broker or
# client process; about a minute on two cores. Extra arguments go to pytest (e.g. -k offsets -x).
# scripts/test.sh runs them too, with everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "test,analysis"
exec .venv/bin/python -m pytest -n "${KCOORD_TEST_WORKERS:-2}" --dist loadscope -m "unit or property" \
  tests/unit tests/property "$@"
