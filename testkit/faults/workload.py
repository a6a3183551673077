"""The workload: real clients over the wire (confluent-kafka), each writing its operations to a
sink (the history, through its process's pipe: testkit/faults/processes.py runs each client in a
process of its own). Producers (idempotent, plain, transactional) write values unique per producer
(``<client>.<incarnation>.<seq>``); consumers in groups subscribe, read and commit; observers poll
each group's committed offsets (OffsetFetch). Every loop ends on its stop flag."""

from __future__ import annotations

import json
import random
import struct
import sys
import threading
import time
from contextlib import suppress
from typing import Any, Protocol

from testkit.faults.history import Record, tp_key


class OpSink(Protocol):
    """Where a client writes what it did (``History.add``'s signature) and what librdkafka
    reports of the partitions it fetches."""

    def add(self, process: str, type_: str, f: str, **fields: Any) -> object: ...

    def statistics(self, process: str, states: dict[str, dict[str, Any]]) -> None: ...

# Commit errors after which the commit surely did not happen; any other failure is unknown.
_DEFINITE_COMMIT_ERRORS = {"ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS",
                           "_NO_OFFSET", "_ASSIGNMENT_LOST", "FENCED_INSTANCE_ID", "_STATE"}


def generation_of(consumer: Any) -> int | None:
    """The group generation librdkafka holds now, from its serialized consumer group metadata
    (``CGMDv2:`` then the generation as a native int32)."""
    try:
        raw = bytes(consumer.consumer_group_metadata())
    except Exception:
        return None
    if not raw.startswith(b"CGMDv2:") or len(raw) < 11:
        return None
    return int(struct.unpack("=i", raw[7:11])[0])


def _flush(producer: Any, timeout: float) -> int:
    """``producer.flush``, with a fatal error raised as KafkaException: confluent-kafka 2.16 raises
    the KafkaError object itself from flush, which is no exception class (only a bare ``except``
    catches it, and a thread it escapes dies without its ``except BaseException`` seeing it)."""
    from confluent_kafka import KafkaException

    try:
        return int(producer.flush(timeout))
    except KafkaException:
        raise
    except:  # noqa: E722
        raise KafkaException(sys.exc_info()[1]) from None


def _error_name(err: Any) -> str:
    try:
        return str(err.name())
    except Exception:
        return str(err)


class Client:
    def __init__(self, name: str, history: OpSink, bootstrap: str) -> None:
        self.client_name = name
        self.history = history
        self.bootstrap = bootstrap
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # a client that dies is recorded, the run goes on
            self.error = exc
            self.history.add(self.client_name, "info", "crash", error=repr(exc))
        except:  # noqa: E722  (an object raised from C that is no exception class: see ``_flush``)
            self.error = RuntimeError(repr(sys.exc_info()[1]))
            self.history.add(self.client_name, "info", "crash", error=repr(sys.exc_info()[1]))

    def work(self) -> None:
        raise NotImplementedError


class SendingProducer(Client):
    """Writes ``rate`` records a second round-robin over the partitions of ``topic``, at most
    ``in_flight`` unacknowledged; ``idempotent`` or a plain producer (acks=all, retries on)."""

    def __init__(self, name: str, history: OpSink, bootstrap: str, topic: str, partitions: int, *,
                 idempotent: bool, rate: float = 40.0, in_flight: int = 200) -> None:
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.idempotent = idempotent
        self.interval = 1.0 / rate
        self.in_flight = in_flight
        self.pending = 0
        self.acked = 0

    def work(self) -> None:
        from confluent_kafka import KafkaException, Producer

        self.history.add(self.client_name, "info", "client", value="idempotent" if self.idempotent else "plain")
        incarnation = 0
        while not self.stop_flag.is_set():
            fatal: list[str] = []

            def delivered(err: Any, msg: Any, fatal: list[str] = fatal) -> None:
                self.pending -= 1
                value = msg.value().decode()
                if err is None:
                    self.acked += 1
                    self.history.add(self.client_name, "ok", "send", topic=msg.topic(), partition=msg.partition(),
                                     offset=msg.offset(), value=value)
                else:
                    self.history.add(self.client_name, "info", "send", topic=msg.topic(), partition=msg.partition(),
                                     value=value, error=_error_name(err))
                    if err.fatal():
                        fatal.append(_error_name(err))

            config = {"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": self.idempotent, "linger.ms": 5,
                      "message.timeout.ms": 120000, "request.timeout.ms": 5000,
                      "socket.timeout.ms": 5000, "retry.backoff.ms": 100,
                      "topic.metadata.refresh.interval.ms": 2000, "client.id": self.client_name}
            if self.idempotent:
                # librdkafka's own account of its producer id and epoch (why it bumps the epoch,
                # which messages it sends again), for the run's output.
                config["debug"] = "eos"
            producer = Producer(config)
            seq = 0
            try:
                while not self.stop_flag.is_set() and not fatal:
                    if self.pending >= self.in_flight:
                        producer.poll(0.05)
                        continue
                    value = f"{self.client_name}.{incarnation}.{seq}"
                    partition = seq % self.partitions
                    self.history.add(self.client_name, "invoke", "send", topic=self.topic, partition=partition,
                                     value=value)
                    try:
                        producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=delivered)
                    except BufferError as exc:
                        self.history.add(self.client_name, "fail", "send", topic=self.topic, partition=partition,
                                         value=value, error=repr(exc))
                        producer.poll(0.1)
                        continue
                    self.pending += 1
                    seq += 1
                    producer.poll(self.interval)
            finally:
                left = 0
                with suppress(KafkaException):  # after a fatal error flush raises it again
                    left = _flush(producer, 120)
                if left:
                    self.history.add(self.client_name, "info", "flush", error=f"{left} records undelivered")
            if fatal:
                self.history.add(self.client_name, "info", "restart", error=fatal[0])
                incarnation += 1


class TransactionalProducer(Client):
    """Transactions of 1-4 records over the partitions of ``topic``, flushed, then committed or
    (one in three) aborted. A fatal error ends the incarnation: a new producer with the same
    transactional id fences the old one."""

    def __init__(self, name: str, history: OpSink, bootstrap: str, topic: str, partitions: int, seed: int,
                 pace: float = 0.1) -> None:
        super().__init__(name, history, bootstrap)
        self.topic = topic
        self.partitions = partitions
        self.rng = random.Random(seed)
        self.pace = pace
        self.txn = 0
        self.outcomes: dict[str, int] = {}

    def _end(self, producer: Any, outcome: str, txn: int) -> str:
        """Commits or aborts, retrying what may be retried; returns "ok", "fail" (it surely did
        not commit) or "info" (unknown, the producer must be replaced)."""
        from confluent_kafka import KafkaException

        self.history.add(self.client_name, "invoke", "txn", txn=txn, value=outcome)
        for _attempt in range(10):
            try:
                (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)
                self.history.add(self.client_name, "ok", "txn", txn=txn, value=outcome)
                self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
                return "ok"
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and not self.stop_flag.is_set():
                    continue
                if outcome == "commit" and err.txn_requires_abort():
                    self.history.add(self.client_name, "fail", "txn", txn=txn, value=outcome, error=_error_name(err))
                    return self._end(producer, "abort", txn)
                self.history.add(self.client_name, "info", "txn", txn=txn, value=outcome, error=_error_name(err))
                return "info"
        self.history.add(self.client_name, "info", "txn", txn=txn, value=outcome, error="retries exhausted")
        return "info"

    def work(self) -> None:
        from confluent_kafka import KafkaException, Producer

        self.history.add(self.client_name, "info", "client", value="transactional")
        incarnation = 0
        while not self.stop_flag.is_set():
            producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.client_name,
                                 "transaction.timeout.ms": 15000, "linger.ms": 5, "message.timeout.ms": 14000,
                                 "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 2000,
                                 "client.id": self.client_name})

            def delivered(err: Any, msg: Any) -> None:
                txn, value = int(msg.key().decode()), msg.value().decode()
                if err is None:
                    self.history.add(self.client_name, "ok", "send", topic=msg.topic(), partition=msg.partition(),
                                     offset=msg.offset(), value=value, txn=txn)
                else:
                    self.history.add(self.client_name, "info", "send", topic=msg.topic(), partition=msg.partition(),
                                     value=value, txn=txn, error=_error_name(err))

            try:
                ready = False
                while not ready and not self.stop_flag.is_set():
                    try:
                        producer.init_transactions(30)
                        ready = True
                    except KafkaException as exc:
                        self.history.add(self.client_name, "info", "init", error=_error_name(exc.args[0]))
                        if not exc.args[0].retriable():
                            break
                if not ready:
                    incarnation += 1
                    continue
                healthy = True
                while healthy and not self.stop_flag.is_set():
                    self.txn += 1
                    txn = self.txn
                    outcome = "commit" if self.rng.random() < 0.67 else "abort"
                    try:
                        producer.begin_transaction()
                        for i in range(self.rng.randint(1, 4)):
                            value = f"{self.client_name}.{incarnation}.{txn}.{i}"
                            partition = self.rng.randrange(self.partitions)
                            self.history.add(self.client_name, "invoke", "send", topic=self.topic,
                                             partition=partition, value=value, txn=txn)
                            producer.produce(self.topic, key=str(txn).encode(), value=value.encode(),
                                             partition=partition, on_delivery=delivered)
                        _flush(producer, 30)
                    except KafkaException as exc:
                        err = exc.args[0]
                        self.history.add(self.client_name, "info", "txn-write", txn=txn, error=_error_name(err))
                        outcome = "abort"
                    healthy = self._end(producer, outcome, txn) == "ok"
                    time.sleep(self.pace)
            finally:
                with suppress(KafkaException):  # an incarnation ended by a fatal error: flush raises it again
                    _flush(producer, 5)
            incarnation += 1


class GroupConsumer(Client):
    """A member of ``group`` subscribed to ``topics`` (read_committed): it records every
    assignment and revocation with the generation, every record it reads, its position each half
    second, and commits its position synchronously after reading."""

    def __init__(self, name: str, history: OpSink, bootstrap: str, group: str, topics: list[str]) -> None:
        super().__init__(name, history, bootstrap)
        self.group = group
        self.topics = topics
        self.assignment: set[tuple[str, int]] = set()
        self.positions: dict[str, int] = {}  # the consumer's position, "topic:partition" -> offset
        self.lock = threading.Lock()
        self.reads = 0
        self.commits = 0
        self._fetch_committed = False
        # librdkafka's own view of each partition it fetches (its statistics, once a second): why
        # a member that stopped reading stopped, told by the client itself.
        self.fetch_states: dict[str, dict[str, Any]] = {}
        self.app_positions: dict[str, int] = {}
        # When the assignment last changed (time.monotonic, which librdkafka's statistics' "ts" also
        # counts, in microseconds): statistics made before it describe the previous assignment, and
        # committing their positions would move the group's offsets back to where this member was
        # before it lost the partitions (another member has read on since).
        self.assignment_changed = 0.0

    def _on_stats(self, text: str) -> None:
        try:
            stats = json.loads(text)
        except ValueError:
            return
        brokers = {b.get("nodeid"): b.get("state") for b in stats.get("brokers", {}).values()}
        states: dict[str, dict[str, Any]] = {}
        for topic, t in stats.get("topics", {}).items():
            for p, part in t.get("partitions", {}).items():
                if int(p) < 0 or part.get("fetch_state") in (None, "none"):
                    continue
                states[tp_key(topic, int(p))] = {
                    k: part.get(k) for k in ("fetch_state", "leader", "next_offset", "app_offset",
                                             "committed_offset", "hi_offset", "ls_offset", "consumer_lag")
                } | {"leader_state": brokers.get(part.get("leader"))}
        self.history.statistics(self.client_name, states)
        made = stats.get("ts")
        with self.lock:
            if not isinstance(made, int) or made / 1e6 < self.assignment_changed:
                self.fetch_states = states
                return
            self.fetch_states = states
            # The application's position of each partition (what Consumer.position answers), read
            # from the statistics: Consumer.position holds the interpreter while it waits for
            # librdkafka's handle lock, and a handle deadlocked inside librdkafka (a lock-order
            # inversion when a broker goes away with an OffsetForLeaderEpoch in flight,
            # confluentinc/librdkafka#5476) then froze every thread of the run, its TCP relays too.
            self.app_positions = {k: int(st["app_offset"]) for k, st in states.items()
                                  if isinstance(st.get("app_offset"), int) and st["app_offset"] >= 0}

    def work(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        self.history.add(self.client_name, "info", "client", value="consumer", group=self.group)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed", "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 500, "socket.timeout.ms": 5000,
                             "topic.metadata.refresh.interval.ms": 2000, "client.id": self.client_name,
                             "statistics.interval.ms": 1000, "stats_cb": self._on_stats})

        def on_assign(c: Any, partitions: list[Any]) -> None:
            held = [(p.topic, p.partition) for p in partitions]
            self.history.add(self.client_name, "ok", "assign", group=self.group, generation=generation_of(c),
                             member=c.memberid(), assignment=held)
            with self.lock:
                self.assignment = set(held)
                self.positions = {}
                self.app_positions = {}
                self.assignment_changed = time.monotonic()
            self._fetch_committed = True

        def on_revoke(c: Any, partitions: list[Any], error: str | None = None) -> None:
            with self.lock:
                self.assignment = set()
                self.positions = {}
                self.app_positions = {}
                self.assignment_changed = time.monotonic()
            self.history.add(self.client_name, "ok", "revoke", group=self.group, generation=generation_of(c),
                             member=c.memberid(), assignment=[(p.topic, p.partition) for p in partitions],
                             error=error)

        def on_lost(c: Any, partitions: list[Any]) -> None:
            on_revoke(c, partitions, "lost")

        consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        last_position = last_commit = 0.0
        dirty = False
        try:
            while not self.stop_flag.is_set():
                msgs = consumer.consume(200, 0.2)
                records: list[Record] = [(str(m.topic()), int(m.partition() or 0), int(m.offset() or 0),
                                          (m.value() or b"").decode()) for m in msgs if m.error() is None]
                if records:
                    self.reads += len(records)
                    dirty = True
                    self.history.add(self.client_name, "ok", "poll", group=self.group, records=records)
                with self.lock:
                    held = sorted(self.assignment)
                if not held:
                    continue
                tps = [TopicPartition(t, p) for t, p in held]
                if self._fetch_committed:
                    self._fetch_committed = False
                    self.history.add(self.client_name, "invoke", "fetch-offsets", group=self.group)
                    try:
                        got = consumer.committed(tps, timeout=5)
                        offsets = {tp_key(x.topic, x.partition): x.offset for x in got if x.offset >= 0}
                        self.history.add(self.client_name, "ok", "fetch-offsets", group=self.group, offsets=offsets)
                        with self.lock:
                            for k, v in offsets.items():
                                self.positions[k] = max(self.positions.get(k, -1), v)
                    except KafkaException as exc:
                        self.history.add(self.client_name, "info", "fetch-offsets", group=self.group,
                                         error=_error_name(exc.args[0]))
                        self._fetch_committed = True
                now = time.monotonic()
                with self.lock:
                    positions = {k: v for k, v in self.app_positions.items() if k in {tp_key(t, p) for t, p in held}}
                if now - last_position >= 0.5:
                    last_position = now
                    with self.lock:
                        for k, v in positions.items():
                            self.positions[k] = max(self.positions.get(k, -1), v)
                        merged = dict(self.positions)
                    self.history.add(self.client_name, "ok", "position", group=self.group, offsets=merged)
                if dirty and positions and now - last_commit >= 0.3:
                    last_commit = now
                    dirty = False
                    self._commit(consumer, positions)
        finally:
            consumer.close()
            self.history.add(self.client_name, "info", "closed", group=self.group)

    def _commit(self, consumer: Any, positions: dict[str, int]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        generation = generation_of(consumer)
        self.history.add(self.client_name, "invoke", "commit", group=self.group, generation=generation,
                         offsets=positions)
        tps = []
        for key, offset in positions.items():
            topic, partition = key.rsplit(":", 1)
            tps.append(TopicPartition(topic, int(partition), offset))
        try:
            done = consumer.commit(offsets=tps, asynchronous=False) or []
        except KafkaException as exc:
            name = _error_name(exc.args[0])
            kind = "fail" if name in _DEFINITE_COMMIT_ERRORS else "info"
            self.history.add(self.client_name, kind, "commit", group=self.group, generation=generation,
                             offsets=positions, error=name)
            return
        failed = [x for x in done if x.error is not None]
        if failed:
            self.history.add(self.client_name, "info", "commit", group=self.group, generation=generation,
                             offsets=positions, error=str(failed[0].error))
            return
        self.commits += 1
        self.history.add(self.client_name, "ok", "commit", group=self.group, generation=generation,
                         offsets={tp_key(x.topic, x.partition): x.offset for x in done} or positions)


class OffsetObserver(Client):
    """Polls ``group``'s committed offsets (OffsetFetch through a consumer that never joins)."""

    def __init__(self, name: str, history: OpSink, bootstrap: str, group: str,
                 partitions: list[tuple[str, int]], interval: float = 1.0) -> None:
        super().__init__(name, history, bootstrap)
        self.group = group
        self.partitions = partitions
        self.interval = interval

    def work(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        self.history.add(self.client_name, "info", "client", value="observer", group=self.group)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "enable.auto.commit": False, "socket.timeout.ms": 5000,
                             "client.id": self.client_name})
        try:
            while not self.stop_flag.wait(self.interval):
                self.history.add(self.client_name, "invoke", "fetch-offsets", group=self.group)
                try:
                    got = consumer.committed([TopicPartition(t, p) for t, p in self.partitions], timeout=5)
                except KafkaException as exc:
                    self.history.add(self.client_name, "info", "fetch-offsets", group=self.group,
                                     error=_error_name(exc.args[0]))
                    continue
                self.history.add(self.client_name, "ok", "fetch-offsets", group=self.group,
                                 offsets={tp_key(x.topic, x.partition): x.offset for x in got if x.offset >= 0})
        finally:
            consumer.close()
