"""Apache Kafka itself, the reference broker: a single-node KRaft broker on loopback, run from the
jars `scripts/kafka.sh` fetched through Maven, and Kafka's own command-line tools.

The differential tests drive the same scenario against it and against kcoord; the tool and Java
client tests run Kafka's programs from the same jars.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from testkit.cache import cache_root
from testkit.ports import api_versions_ok, free_port

ROOT = Path(__file__).resolve().parent.parent

# The broker's heap: enough for the tests' few groups and topics, little on a 2-core, 24 GB machine.
HEAP = "-Xmx768m"

# Kafka's defaults where a test broker needs others. Each is also what kcoord's test brokers use
# (group.initial.rebalance.delay.ms=0) or what a one-node broker must have (replication factors 1).
TEST_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    # Kafka 4.3+ computes a consumer group's target assignment at most once a second (KIP-1263), as
    # kcoord does; both run the tests with each change assigned in the heartbeat that brings it
    # (testkit.kcoord), and the batching's own tests set the interval per group.
    "group.consumer.assignment.interval.ms": "0",
    # The same for share groups (KIP-932).
    "group.share.assignment.interval.ms": "0",
}

# KIP-1331: the topology description plugin Kafka ships (descriptions kept in the broker's memory);
# the session's reference broker runs with it, and the differential kcoord broker with its own.
TOPOLOGY_DESCRIPTION_PLUGIN = {
    "group.streams.topology.description.plugin.class": "org.apache.kafka.server.streams.InMemoryTopologyDescriptionPlugin",
}

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# The secret delegation tokens' HMACs are made with, on the test brokers that serve SASL, and the
# users the session's reference broker knows (the differential kcoord broker has the same).
TOKEN_SECRET = "differential-token-secret"
SASL_USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
# The SASL listener's OAUTHBEARER: Kafka's unsecured validator, requiring the scope ``kafka`` (the
# login claim is the broker's own token, which Kafka makes at startup and kcoord does not need).
OAUTHBEARER_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                    'unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="kafka";')


def sasl_properties(port: int, controller_port: int, sasl_port: int | None,
                    users: dict[str, str]) -> dict[str, str]:
    """A SASL_PLAINTEXT listener beside PLAINTEXT (which stays the inter-broker listener)."""
    plain_users = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTHBEARER_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
        **{f"listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config":
           "org.apache.kafka.common.security.scram.ScramLoginModule required;" for m in SCRAM_MECHANISMS},
        "delegation.token.secret.key": TOKEN_SECRET,
    }


LOG4J2 = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


def kafka_libs() -> Path | None:
    """The directory of Kafka's jars, fetched by scripts/kafka.sh; None when it has not run."""
    explicit = os.environ.get("KCOORD_KAFKA_LIBS")
    if explicit:
        return Path(explicit) if Path(explicit).is_dir() else None
    pom = (ROOT / "reference" / "pom.xml").read_text()
    version = pom.split("<kafka.version>", 1)[1].split("<", 1)[0]
    cache = cache_root()
    libs = cache / f"kafka-{version}" / "libs"
    return libs if any(cache.glob(f"kafka-{version}/.complete-*")) and libs.is_dir() else None


def java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def classpath(libs: Path) -> str:
    return str(libs / "*")


def class_archive(libs: Path) -> Path:
    """The JVM's class-data archive of Kafka's jars (AppCDS), beside them in the cache: a tool run
    with it starts in about half the time (~0.5 s instead of ~1.2 s). Named after the JVM and the
    jars, so that another JDK or another Kafka makes its own."""
    binary = java() or "java"
    real = Path(binary).resolve()
    key = f"{real}:{real.stat().st_mtime_ns if real.exists() else 0}:{sorted(p.name for p in libs.glob('*.jar'))}"
    return libs.parent / f"classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def java_command(libs: Path, main: str, *args: str, classes: Path | None = None,
                 heap: str = "-Xmx256m", jvm: tuple[str, ...] = ()) -> list[str]:
    """A short-lived JVM running ``main`` from Kafka's jars (and ``classes``, a directory of test
    programs, after them: the class archive covers the jars only as a prefix of the classpath)."""
    binary = java()
    if binary is None:
        raise RuntimeError("java is not installed")
    path = classpath(libs) if classes is None else f"{classpath(libs)}{os.pathsep}{classes}"
    archive = class_archive(libs)
    sharing = [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []
    # -Xlog: the JVM's own warnings (a stale class archive, say) go to stderr, never into the
    # output the tests parse.
    return [binary, heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xlog:disable", "-Xlog:all=error:stderr",
            *sharing, "-Dlog4j2.level=WARN", *jvm, "-cp", path, main, *args]


class KafkaProcess:
    """A real Apache Kafka broker (KRaft, broker and controller in one process) on loopback."""

    def __init__(self, libs: Path, work_dir: Path, properties: dict[str, str] | None = None,
                 sasl_users: dict[str, str] | None = None) -> None:
        """With ``sasl_users`` (name -> password) the broker also listens on SASL_PLAINTEXT
        (``sasl_port``) with PLAIN and both SCRAM mechanisms for those users (SCRAM credentials
        created at format, as ``kafka-storage format --add-scram`` does), and delegation tokens on."""
        self.libs = libs
        self.work_dir = work_dir
        self.port = free_port()
        self.controller_port = free_port()
        self.sasl_users = dict(sasl_users or {})
        self.sasl_port = free_port() if self.sasl_users else None
        self.node_id = 1
        self.properties = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(work_dir / "data"),
            **TEST_PROPERTIES,
        }
        if self.sasl_users:
            self.properties.update(sasl_properties(self.port, self.controller_port, self.sasl_port, self.sasl_users))
        self.properties.update(properties or {})
        self.log_path = work_dir / "kafka.log"
        # System properties for the broker's JVM (``-Djava.security.krb5.conf=...``).
        self.jvm: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        assert self.sasl_port is not None
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def data_dir(self) -> Path:
        return Path(self.properties["log.dirs"])

    def start(self, wait: float = 90.0) -> KafkaProcess:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "log4j2.yaml").write_text(LOG4J2)
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        # An id that starts with "-" reads as an option to the tool (Kafka's own ids never do).
        cluster_id_text = "-"
        while cluster_id_text.startswith("-"):
            cluster_id_text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        scram = [arg for user, password in self.sasl_users.items() for mechanism in SCRAM_MECHANISMS
                 for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]
        formatted = run_tool(self.libs, "kafka.tools.StorageTool", "format", "-t", cluster_id_text,
                             "-c", str(config), *scram, work_dir=self.work_dir)
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{formatted.stdout}\n{formatted.stderr}")
        binary = java()
        assert binary is not None
        args = [binary, HEAP, "-Xms256m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.yaml'}",
                *self.jvm, "-cp", classpath(self.libs), "kafka.Kafka", str(config)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            if api_versions_ok(self.port):
                return self
            time.sleep(0.2)
        raise RuntimeError(f"kafka did not answer within {wait}s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def tool(self, main: str, *args: str, timeout: float = 120.0,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Runs one of Kafka's command-line tools (its main class, e.g.
        ``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``) to completion."""
        return run_tool(self.libs, main, *args, timeout=timeout, input=input, work_dir=self.work_dir)


def run_tool(libs: Path, main: str, *args: str, timeout: float = 120.0, input: str | None = None,
             work_dir: Path | None = None, jvm: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools, against whichever broker its arguments name (Kafka or kcoord);
    ``jvm``: system properties for its JVM (``-Djava.security.krb5.conf=...``)."""
    command = java_command(libs, main, *args, jvm=jvm)
    archive = class_archive(libs)
    recording = None
    if not archive.exists():
        # The first tool run records the classes it loaded; later JVMs map them ready-made.
        recording = archive.with_name(f"{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        command.insert(1, f"-XX:ArchiveClassesAtExit={recording}")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, input=input,
                              cwd=work_dir)
        if recording is not None and done.returncode == 0 and recording.exists():
            os.replace(recording, archive)  # atomic: a concurrent JVM maps a whole archive or none
        return done
    finally:
        if recording is not None:
            recording.unlink(missing_ok=True)
