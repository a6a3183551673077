#!/usr/bin/env bash
# Fetches the pinned Apache Kafka (broker, tools, Java clients, Kafka Streams and every dependency)
# through Maven into a cache outside the work tree, once, and prints the directory of its jars.
# The tests run it as the reference broker and use its tools and clients. Idempotent: once the
# cache is complete, nothing is asked of Maven (offline afterwards).
# Cache root: $KCOORD_CACHE, default ~/.cache/kcoord.
set -euo pipefail
cd "$(dirname "$0")/.."
pom=reference/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
cache="${KCOORD_CACHE:-$HOME/.cache/kcoord}/kafka-$version"
libs="$cache/libs"
# The stamp carries the pom's digest: a changed dependency list fetches again.
digest=$(sha256sum "$pom" | cut -c1-16)
if [ ! -f "$cache/.complete-$digest" ]; then
  command -v mvn >/dev/null 2>&1 || { echo "mvn is not installed: cannot fetch Apache Kafka $version" >&2; exit 1; }
  rm -rf "$libs.partial"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$libs.partial" >&2
  rm -rf "$libs"
  mv "$libs.partial" "$libs"
  rm -f "$cache"/.complete-*
  touch "$cache/.complete-$digest"
fi
echo "$libs"
