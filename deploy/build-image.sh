#!/usr/bin/env bash
# Builds the broker image from the Dockerfile without any registry and without a daemon,
# then starts it and checks that it speaks Kafka:
#
#   1. mmdebstrap makes a minimal Debian bookworm root with python3 (from the Debian mirror
#      this machine's apt uses) and it is imported as a local base image;
#   2. buildah builds the Dockerfile's default target on top of it (--build-arg BASE=...);
#   3. the image's own entrypoint + command run under `buildah run`, listening on a free
#      loopback port, and an ApiVersions v0 request must be answered with the same
#      correlation id; the metrics endpoint and `kcoord health` are checked too;
#   4. the same command with `--nodes 2` (the private etcd from the image's etcd-server): both
#      nodes must pass `kcoord health`, and SIGTERM must stop the launcher cleanly.
#
# Everything lives in a private temporary container store that is removed on exit.
# Exits 0 with "skipped: <reason>" when the tools for this are not installed.
#
# Environment:
#   KCOORD_BUILD_TIMEOUT   seconds allowed for the whole run (default 170, 900 with analysis)
#   KCOORD_BUILD_ANALYSIS  1 to also build the analysis target and check Java + PySpark in it
#   KCOORD_DEBIAN_MIRROR   Debian mirror to build the base from (default: the one apt uses)
set -euo pipefail

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
with_analysis="${KCOORD_BUILD_ANALYSIS:-0}"
default_timeout=170
[ "$with_analysis" = 1 ] && default_timeout=900
deadline=$((SECONDS + ${KCOORD_BUILD_TIMEOUT:-$default_timeout}))

skip() {
    echo "skipped: $*"
    exit 0
}

for tool in mmdebstrap buildah python3; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed"
done
[ "$(id -u)" -eq 0 ] || skip "building a root filesystem and running chroot isolation need root"

remaining() {
    local left=$((deadline - SECONDS))
    if [ "$left" -le 0 ]; then
        echo "error: out of time" >&2
        exit 1
    fi
    echo "$left"
}

step() { printf '\n==> [%3ss] %s\n' "$SECONDS" "$*"; }

# Debian's mirror as apt on this machine knows it, so the base comes from the same place
# the host's packages do (a local mirror or proxy included).
debian_mirror() {
    if [ -n "${KCOORD_DEBIAN_MIRROR:-}" ]; then
        echo "$KCOORD_DEBIAN_MIRROR"
        return
    fi
    local uri=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        uri="$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
    fi
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri="$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' \
            /etc/apt/sources.list)"
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

work="$(mktemp -d "${TMPDIR:-/tmp}/kcoord-image.XXXXXX")"
store=(--root "$work/storage" --runroot "$work/run" --storage-driver overlay)
# Some kernels or nested containers cannot mount overlayfs; vfs is slower but works anywhere.
buildah "${store[@]}" info >/dev/null 2>&1 ||
    store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
tag="build-$$"
base_image="localhost/kcoord-base:$tag"
image="localhost/kcoord:$tag"
server_pid=""

# Stops the server: SIGTERM to its process group (setsid), SIGKILL after $1 tenths of a second.
stop_server() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM -- "-$server_pid" 2>/dev/null
        for _ in $(seq "$1"); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    server_pid=""
}

cleanup() {
    local rc=$?
    set +e
    # The launcher of --nodes stops its nodes and etcd (in sessions of their own) before it exits.
    stop_server 600
    buildah "${store[@]}" rm --all >/dev/null 2>&1
    buildah "${store[@]}" rmi --all --force >/dev/null 2>&1
    # containers/storage may leave its own mounts under the store; they must go first.
    grep -o " $work/[^ ]*" /proc/self/mounts | sort -r | while read -r mnt; do umount -l "$mnt"; done
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mirror="$(debian_mirror)"
step "base image: Debian bookworm + python3 from $mirror"
# The host's CA bundle goes into the base so that pip in the build trusts whatever the
# host trusts (a TLS-intercepting proxy on the way to the package index, for one).
hooks=()
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
    hooks+=(--customize-hook='copy-in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs')
fi
timeout "$(remaining)" mmdebstrap --quiet --variant=apt \
    --include=python3,python3-venv,python3-pip,ca-certificates "${hooks[@]}" \
    bookworm "$work/base.tar" "$mirror"

ctr="$(buildah "${store[@]}" from scratch)"
buildah "${store[@]}" add "$ctr" "$work/base.tar" / >/dev/null
buildah "${store[@]}" commit --quiet --rm "$ctr" "$base_image" >/dev/null
rm -f "$work/base.tar"

step "buildah bud --build-arg BASE=$base_image"
timeout "$(remaining)" buildah "${store[@]}" bud --isolation chroot --layers=false --format docker \
    --build-arg "BASE=$base_image" --tag "$image" \
    --file "$repo_dir/Dockerfile" "$repo_dir"

# The image's own user, healthcheck, entrypoint and command, exactly as a container runtime
# would see them.
buildah "${store[@]}" inspect --type image "$image" >"$work/image.json"
mapfile -t argv < <(python3 - "$work/image.json" <<'PY'
import json
import sys

with open(sys.argv[1]) as f:
    info = json.load(f)
config = info["OCIv1"]["config"]
if config.get("User") != "10001":
    sys.exit(f"image runs as {config.get('User')!r}, want 10001")
health = (info.get("Docker", {}).get("config") or {}).get("Healthcheck") or {}
if "health" not in (health.get("Test") or []):
    sys.exit(f"image has no kcoord health check: {health!r}")
for arg in (config.get("Entrypoint") or []) + (config.get("Cmd") or []):
    print(arg)
PY
)
[ "${#argv[@]}" -gt 0 ] || { echo "error: cannot read the image's configuration" >&2; exit 1; }

read -r port metrics_port < <(python3 -c 'import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

step "run: ${argv[*]} on 127.0.0.1:$port"
ctr="$(buildah "${store[@]}" from "$image")"
setsid buildah "${store[@]}" run --isolation chroot \
    --env "KCOORD_LISTENERS=PLAINTEXT://127.0.0.1:$port" \
    --env "KCOORD_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:$port" \
    --env "KCOORD_METRICS_LISTENER=http://127.0.0.1:$metrics_port" \
    "$ctr" -- "${argv[@]}" >"$work/server.log" 2>&1 &
server_pid=$!

step "probe: ApiVersions v0"
probe_timeout=$(( $(remaining) < 60 ? $(remaining) : 60 ))
if ! python3 - "$port" "$probe_timeout" "$server_pid" <<'PY'; then
import os
import socket
import struct
import sys
import time

port, timeout, server_pid = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
correlation_id = 0x4B43_0001
client_id = b"build-image"
# Request header v1 (api_key, api_version, correlation_id, client_id) and an empty v0 body.
request = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
frame = struct.pack(">i", len(request)) + request


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed mid-frame")
        data += chunk
    return data


give_up = time.monotonic() + timeout
while True:
    try:
        os.kill(server_pid, 0)
    except ProcessLookupError:
        sys.exit("server exited before answering")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(frame)
            (size,) = struct.unpack(">i", read_exact(sock, 4))
            body = read_exact(sock, size)
        break
    except OSError as exc:
        if time.monotonic() > give_up:
            sys.exit(f"no ApiVersions answer within {timeout:.0f}s: {exc}")
        time.sleep(0.5)

got_id, error_code, count = struct.unpack_from(">ihi", body)
if got_id != correlation_id:
    sys.exit(f"correlation id {got_id:#x}, sent {correlation_id:#x}")
if error_code != 0:
    sys.exit(f"ApiVersions error code {error_code}")
apis = {struct.unpack_from(">hhh", body, 10 + 6 * i)[0]: struct.unpack_from(">hhh", body, 10 + 6 * i)[1:]
        for i in range(count)}
if 18 not in apis:
    sys.exit("ApiVersions does not list itself")
print(f"ApiVersions v0 answered: {count} APIs, ApiVersions {apis[18][0]}-{apis[18][1]}")
PY
    echo "---- server output ----" >&2
    cat "$work/server.log" >&2
    exit 1
fi

step "probe: metrics on 127.0.0.1:$metrics_port"
python3 - "$metrics_port" <<'PY'
import sys
import urllib.request

with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10) as resp:
    text = resp.read().decode()
names = sorted({line.split("{")[0].split(" ")[0] for line in text.splitlines()
                if line.startswith("kcoord_")})
if not names:
    sys.exit("no kcoord_* metrics exposed")
print(f"{len(names)} kcoord_* series names exposed")
PY

step "health: kcoord health --bootstrap 127.0.0.1:$port"
health_ok=""
for _ in $(seq 15); do
    if buildah "${store[@]}" run --isolation chroot "$ctr" -- \
        kcoord health --bootstrap "127.0.0.1:$port" >"$work/health.log" 2>&1; then
        health_ok=1
        break
    fi
    [ "$(remaining)" -gt 5 ] || break
    sleep 1
done
if [ -z "$health_ok" ]; then
    cat "$work/health.log" >&2
    exit 1
fi

step "run: ${argv[*]} --nodes 2 (the image's etcd-server as the private etcd)"
stop_server 50
read -r nodes_port < <(python3 -c 'import socket
while True:
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", 0))
        port = a.getsockname()[1]
        try:
            b.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
    print(port)
    break')
nctr="$(buildah "${store[@]}" from "$image")"
setsid buildah "${store[@]}" run --isolation chroot \
    --env "KCOORD_LISTENERS=PLAINTEXT://127.0.0.1:$nodes_port" \
    --env "KCOORD_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:$nodes_port" \
    --env "KCOORD_METRICS_LISTENER=" --env "KCOORD_CONSOLE_LISTENER=" \
    "$nctr" -- "${argv[@]}" --nodes 2 >"$work/nodes.log" 2>&1 &
server_pid=$!
for node_port in "$nodes_port" "$((nodes_port + 1))"; do
    health_ok=""
    while [ "$(remaining)" -gt 5 ]; do
        if buildah "${store[@]}" run --isolation chroot "$nctr" -- \
            kcoord health --bootstrap "127.0.0.1:$node_port" >"$work/health.log" 2>&1; then
            health_ok=1
            break
        fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 1
    done
    if [ -z "$health_ok" ]; then
        cat "$work/health.log" "$work/nodes.log" >&2
        exit 1
    fi
done
# SIGTERM to the launcher itself, as a container runtime sends it (buildah, signalled, would
# SIGKILL it): the launcher is the deepest process under buildah whose command has --nodes
# (buildah-chroot-exec above it has the same arguments).
descendants() {
    local child
    for child in $(pgrep -P "$1" || true); do
        echo "$child"
        descendants "$child"
    done
}
ps -eo pid,ppid,sid,args --forest >"$work/tree.txt"
launcher_pid=""
for pid in $(descendants "$server_pid"); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "serve --nodes 2"; then
        launcher_pid="$pid"
    fi
done
[ -n "$launcher_pid" ] && kill -TERM "$launcher_pid"
for _ in $(seq 600); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
stop_server 1
if ! grep -q "launcher.stopped status=0" "$work/nodes.log"; then
    cat "$work/tree.txt" >&2
    tail -n 50 "$work/nodes.log" >&2
    exit 1
fi
echo "both nodes answered; the launcher stopped them and its etcd"

if [ "$with_analysis" = 1 ]; then
    step "buildah bud --target analysis"
    timeout "$(remaining)" buildah "${store[@]}" bud --isolation chroot --layers=false --format docker \
        --build-arg "BASE=$base_image" --target analysis --tag "localhost/kcoord-analysis:$tag" \
        --file "$repo_dir/Dockerfile" "$repo_dir"
    actr="$(buildah "${store[@]}" from "localhost/kcoord-analysis:$tag")"
    buildah "${store[@]}" run --isolation chroot "$actr" -- java -version
    buildah "${store[@]}" run --isolation chroot "$actr" -- \
        python -c 'import pyspark, pyarrow, pandas, matplotlib, analytics; print("pyspark", pyspark.__version__)'
    # A real local session as uid 10001: the JVM side resolves the user name and needs a home.
    # Unlike a container runtime, buildah does not put the container's hostname into
    # /etc/hosts, so Spark is told its address instead of looking it up.
    buildah "${store[@]}" run --isolation chroot \
        --env SPARK_LOCAL_IP=127.0.0.1 --env SPARK_LOCAL_HOSTNAME=localhost "$actr" -- python -c '
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
print("spark rows:", spark.range(1000).selectExpr("sum(id)").first()[0])
spark.stop()'
    buildah "${store[@]}" run --isolation chroot "$actr" -- kcoord analyze --help >/dev/null
    step "ok: analysis image has Java and PySpark"
fi

step "ok: image builds, starts as uid 10001, answers ApiVersions and runs --nodes 2 (${SECONDS}s)"
