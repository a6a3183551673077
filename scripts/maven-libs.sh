#!/usr/bin/env bash
# Copies the artifacts a reference pom names, with every dependency, through Maven into a cache
# outside the work tree, once, and prints the directory of their jars.
#   scripts/maven-libs.sh reference/pom.xml kafka kafka.version
#   scripts/maven-libs.sh reference/oidc-provider/pom.xml oidc-provider oidc-provider.version
# The cache is <root>/<name>-<version>/libs, <version> read from the pom's <property> line; a
# stamp carrying the pom's digest makes a changed dependency list fetch again. Idempotent: once the
# cache is complete, nothing is asked of Maven (offline afterwards). Root: $KCOORD_CACHE, default
# ~/.cache/kcoord.
set -euo pipefail
cd "$(dirname "$0")/.."
pom=$1 name=$2 property=$3
version=$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$pom")
[ -n "$version" ] || { echo "$pom has no <$property>" >&2; exit 1; }
cache="${KCOORD_CACHE:-$HOME/.cache/kcoord}/$name-$version"
libs="$cache/libs"
digest=$(sha256sum "$pom" | cut -c1-16)
if [ ! -f "$cache/.complete-$digest" ]; then
  command -v mvn >/dev/null 2>&1 || { echo "mvn is not installed: cannot fetch $name $version" >&2; exit 1; }
  rm -rf "$libs.partial"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$libs.partial" >&2
  rm -rf "$libs"
  mv "$libs.partial" "$libs"
  rm -f "$cache"/.complete-*
  touch "$cache/.complete-$digest"
fi
echo "$libs"
