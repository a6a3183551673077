"""Python client libraries (confluent-kafka, kafka-python) producing and consuming in a group."""

from __future__ import annotations

import threading
from collections.abc import Callable

Seen = list[tuple[int, int, str]]  # (partition, offset, value)


class GroupRun:
    """Collects what several consumers of one group read; records count only once committed, so
    when the target is reached everything read is also committed."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.seen: Seen = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.errors: list[str] = []

    def add(self, batch: Seen) -> None:
        with self.lock:
            self.seen += batch
            if len(self.seen) >= self.target:
                self.done.set()


def confluent_produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(first, first + count):
        p.produce(topic, key=b"k%d" % i, value=b"m%d" % i)
        p.poll(0)
    assert p.flush(30) == 0


def confluent_group(bootstrap: str, topic: str, group: str, target: int) -> Seen:
    from confluent_kafka import Consumer

    run = GroupRun(target)

    def member() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
        c.subscribe([topic])
        try:
            while not run.done.is_set():
                msgs = [m for m in c.consume(200, 0.2) if m.error() is None]
                if msgs:
                    c.commit(asynchronous=False)
                    run.add([(m.partition(), m.offset(), m.value().decode()) for m in msgs])
        except Exception as exc:
            run.errors.append(repr(exc))
            run.done.set()
        finally:
            c.close()

    return _threads(run, member)


def kafka_python_group(bootstrap: str, topic: str, group: str, target: int) -> Seen:
    from kafka import KafkaConsumer

    run = GroupRun(target)

    def member() -> None:
        # Metadata refreshed each second: a leader whose metadata lacked the new topic assigned
        # nothing, and kafka-python refreshes it only every 5 minutes by default.
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                          auto_offset_reset="earliest", session_timeout_ms=10000, metadata_max_age_ms=1000)
        try:
            while not run.done.is_set():
                polled = c.poll(timeout_ms=200)
                batch = [(m.partition, m.offset, m.value.decode()) for msgs in polled.values() for m in msgs]
                if batch:
                    c.commit()
                    run.add(batch)
        except Exception as exc:
            run.errors.append(repr(exc))
            run.done.set()
        finally:
            c.close()

    return _threads(run, member)


def _threads(run: GroupRun, member: Callable[[], None]) -> Seen:
    threads = [threading.Thread(target=member, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    run.done.wait(90)
    run.done.set()
    for t in threads:
        t.join(30)
    assert not run.errors, run.errors
    return run.seen
