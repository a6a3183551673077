#!/usr/bin/env bash
# Fetches the pinned Apache Kafka (broker, tools, Java clients, Kafka Streams and every dependency)
# through Maven into a cache outside the work tree, once, and prints the directory of its jars.
# The tests run it as the reference broker and use its tools and clients. Idempotent: once the
# cache is complete, nothing is asked of Maven (offline afterwards).
# Cache root: $KCOORD_CACHE, default ~/.cache/kcoord.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/maven-libs.sh reference/pom.xml kafka kafka.version
