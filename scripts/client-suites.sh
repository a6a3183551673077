#!/usr/bin/env bash
# Runs kafka-python's own integration suite (from its sdist, fetched once into ~/.cache/kcoord)
# unchanged against a kcoord broker configured as that suite configures Kafka; prints pytest's
# report and the counts. Extra arguments go to pytest (e.g. -k describe). See docs/client-suites.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m testkit.client_suites "$@"
