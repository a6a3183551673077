#!/usr/bin/env bash
# Sets up everything the tests need (Debian packages, the Python test and analysis extras,
# the Node client, Apache Kafka through Maven) and runs lint, type checks and the whole test suite. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# Go and the Debian-packaged Sarama and kafka-go sources: the Go client tests build against them
# offline (GO111MODULE=off, GOPATH=/usr/share/gocode).
# etcd-server: the cluster tests start a real etcd; etcd-client (etcdctl): they turn its auth on.
# libfaketime: the fault tests step a node's wall clock.
# krb5-kdc, krb5-admin-server (kdb5_util, kadmin.local), krb5-user (kinit, which kcat runs): the
# GSSAPI tests start a real KDC; libkrb5-dev: python-gssapi builds against it;
# libsasl2-modules-gssapi-mit: kcat's GSSAPI.
# chromium, chromium-driver: the console's browser tests (Selenium drives /usr/bin/chromedriver).
apt_packages=(kcat prometheus etcd-server etcd-client libfaketime docker-compose buildah mmdebstrap golang-github-shopify-sarama-dev golang-github-segmentio-kafka-go-dev krb5-kdc krb5-admin-server krb5-user libkrb5-dev libsasl2-modules-gssapi-mit chromium chromium-driver)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# A Go toolchain installed outside Debian (any Go since 1.19 builds the tests in GOPATH mode) is
# used as it is; Debian's only when there is none.
command -v go >/dev/null 2>&1 || missing+=(golang-go)
# Node.js (for the kafkajs client test) may come from elsewhere than Debian; only add it if absent.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# Spark (the analysis tests) needs a Java runtime; the Java client tests compile with javac; Maven
# fetches Apache Kafka (scripts/kafka.sh).
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    for p in "${missing[@]}"; do
      # One at a time: a package the mirror lacks must not stop the others.
      apt-get install -y -qq --no-install-recommends "$p" >/dev/null || echo "note: apt could not install $p"
    done
  else
    echo "note: not root, cannot apt-get install ${missing[*]}; tests that need them will be skipped"
  fi
fi

scripts/setup.sh "test,analysis"
# GSSAPI (the kerberos extra) builds against libkrb5-dev; without it the GSSAPI tests skip.
.venv/bin/python -c "import gssapi" 2>/dev/null || .venv/bin/python -m pip install --quiet "gssapi>=1.8" \
  || echo "note: could not install python-gssapi; the GSSAPI tests will be skipped"

# Apache Kafka, the reference broker of the differential tests, with its tools, Java clients and
# Kafka Streams: fetched through Maven into a cache outside the work tree (once; offline after).
if kafka_libs=$(scripts/kafka.sh); then
  export KCOORD_KAFKA_LIBS="$kafka_libs" KCOORD_REQUIRE_KAFKA=1
else
  echo "note: could not fetch Apache Kafka through Maven; the tests that need it will be skipped"
fi
# An OpenID Connect identity provider (a JVM server, reference/oidc-provider/pom.xml) for the
# OAUTHBEARER (OIDC) tests, in a cache of its own: its libraries' versions differ from Kafka's.
if oidc_libs=$(scripts/maven-libs.sh reference/oidc-provider/pom.xml oidc-provider oidc-provider.version); then
  export KCOORD_OIDC_LIBS="$oidc_libs"
else
  echo "note: could not fetch the OIDC provider through Maven; the OIDC tests will be skipped"
fi

if [ -f tests/js/package.json ] && command -v npm >/dev/null; then
  (cd tests/js && { [ -d node_modules ] || npm install --silent --no-audit --no-fund >/dev/null; })
fi

.venv/bin/ruff check .
.venv/bin/mypy
# The whole suite, or, given paths or test ids, just those.
# Two workers: most tests wait on brokers, clients and timeouts rather than on the CPU. Tests that
# share a session-wide process (Apache Kafka, Spark) run on one worker (tests/conftest.py).
exec .venv/bin/python -m pytest -n "${KCOORD_TEST_WORKERS:-2}" --dist loadscope "$@"
