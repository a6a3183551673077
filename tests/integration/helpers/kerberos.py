"""Kerberos clients for the GSSAPI tests: kafka-python in a process of its own (python-gssapi reads
its keytab and realm from the environment) and the Java client's properties for a keytab login."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

KAFKA_PYTHON = textwrap.dedent("""
    import sys
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    bootstrap, topic, bootstrap_timeout_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    conf = dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                sasl_kerberos_service_name="kafka", sasl_kerberos_domain_name="localhost")
    admin = KafkaAdminClient(**conf, bootstrap_timeout_ms=bootstrap_timeout_ms)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        print("created")
    except Exception as exc:
        print("create failed", type(exc).__name__)
    producer = KafkaProducer(**conf, max_block_ms=10000)
    try:
        producer.send(topic, b"via kerberos").get(timeout=30)
        print("sent")
    except Exception as exc:
        print("send failed", type(exc).__name__)
    producer.close()
    admin.close()
""")


def kafka_python_as(bootstrap: str, env: dict[str, str], topic: str, bootstrap_timeout_ms: int = 30_000) -> str:
    """Runs kafka-python (creates ``topic``, sends a record) with ``env``'s Kerberos login; its
    output says what worked ("created", "sent") and what failed, with the error's class. A login
    the broker refuses leaves its admin client retrying until ``bootstrap_timeout_ms`` (kafka-python's
    default, 30 s, unless a test that expects the refusal says less), then "Unable to bootstrap"."""
    done = subprocess.run([sys.executable, "-c", KAFKA_PYTHON, bootstrap, topic, str(bootstrap_timeout_ms)], env=env,
                          capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def java_client_config(directory: Path, keytab: Path, principal: str) -> Path:
    """The Java client's properties for a keytab login as ``principal``."""
    config = directory / "krb.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"
        "sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="{keytab}" principal="{principal}";\n')
    return config
