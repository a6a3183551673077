# syntax=docker/dockerfile:1
#
# Targets:
#   runtime (default)  the broker: `kcoord serve`, no Java, no Spark
#   analysis           the PySpark report job: `kcoord analyze`, with a JRE
#
# BASE must provide python3 >= 3.11 with pip and venv (python:3.11-slim does; a Debian
# bookworm base needs python3, python3-pip and python3-venv).
ARG BASE=python:3.11-slim

# ---------------------------------------------------------------------------
# Wheels of the project and every dependency, so the runtime stages install offline
# from a fixed set and carry no compilers or build caches.
FROM ${BASE} AS builder
WORKDIR /src
COPY pyproject.toml README* ./
COPY protocol/ protocol/
COPY storage/ storage/
COPY broker/ broker/
COPY analytics/ analytics/
COPY doctor/ doctor/
COPY kclient/ kclient/
COPY kcoord/ kcoord/
RUN python3 -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM builder AS analysis-wheels
RUN python3 -m pip wheel --no-cache-dir --wheel-dir /wheels-analysis ".[analysis]"

# ---------------------------------------------------------------------------
# What both images share: a venv, a fixed numeric user (named, because the JVM side of
# Spark refuses to run as a uid without a passwd entry) and the data directory, created
# here so a fresh named volume inherits its ownership.
FROM ${BASE} AS runtime-base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/kcoord/bin:$PATH \
    KCOORD_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KCOORD_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KCOORD_LOG_DIRS=/var/lib/kcoord \
    KCOORD_METRICS_LISTENER=http://0.0.0.0:9464
RUN python3 -m venv /opt/kcoord \
    && groupadd --gid 10001 kcoord \
    && useradd --uid 10001 --gid 10001 --home-dir /home/kcoord --create-home \
       --shell /usr/sbin/nologin kcoord \
    && mkdir -p /var/lib/kcoord \
    && chown 10001:10001 /var/lib/kcoord
WORKDIR /home/kcoord

# ---------------------------------------------------------------------------
FROM runtime-base AS analysis
# The distribution's default JRE is one Spark 4 supports (17 on bookworm, 21 on trixie);
# its exact version follows the base image's security updates, so it is not pinned.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=analysis-wheels,source=/wheels-analysis,target=/wheels \
    /opt/kcoord/bin/python -m pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl \
    && /opt/kcoord/bin/python -m pip check \
    && mkdir -p /reports \
    && chown 10001:10001 /reports
USER 10001
# Spark's workers must run the interpreter that has the project installed.
ENV PYSPARK_PYTHON=/opt/kcoord/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/kcoord/bin/python
VOLUME /reports
ENTRYPOINT ["kcoord"]
CMD ["analyze", "--data-dir", "/var/lib/kcoord", "--out", "/reports"]

# ---------------------------------------------------------------------------
# Last, so that a plain build produces the broker.
FROM runtime-base AS runtime
# Debian's etcd server, which `kcoord serve --nodes N` runs privately on loopback when no
# etcd.endpoints is given (docs/cluster.md); its version follows the base image's updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends etcd-server \
    && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    /opt/kcoord/bin/python -m pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl \
    && /opt/kcoord/bin/python -m pip check
USER 10001
VOLUME /var/lib/kcoord
EXPOSE 9092 9464
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["kcoord", "health", "--bootstrap", "127.0.0.1:9092"]
ENTRYPOINT ["kcoord"]
CMD ["serve"]
