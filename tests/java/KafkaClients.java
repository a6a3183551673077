import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java clients against a broker, one scenario per run, every result a JSON line on stdout
 * (the test asserts on those):
 *
 *   group BOOTSTRAP TOPIC GROUP PROTOCOL RECORDS   two KafkaConsumers (group.protocol=PROTOCOL)
 *   transactions BOOTSTRAP IN OUT GROUP RECORDS    read-process-write, then an aborted transaction
 *   admin BOOTSTRAP TOPIC GROUP                    the Admin client's topic, cluster, group, records and
 *                                                  log-directory calls
 */
public final class KafkaClients {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_MS = 90_000;

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "group" -> group(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]));
            case "transactions" -> transactions(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]));
            case "admin" -> admin(args[1], args[2], args[3]);
            default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
        }
    }

    // ---- JSON lines ----------------------------------------------------------------------------

    private static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static String json(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof String s) {
            return quote(s);
        }
        if (value instanceof Number || value instanceof Boolean) {
            return value.toString();
        }
        if (value instanceof Map<?, ?> map) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<?, ?> e : map.entrySet()) {
                parts.add(quote(String.valueOf(e.getKey())) + ":" + json(e.getValue()));
            }
            return "{" + String.join(",", parts) + "}";
        }
        if (value instanceof Collection<?> items) {
            List<String> parts = new ArrayList<>();
            for (Object item : items) {
                parts.add(json(item));
            }
            return "[" + String.join(",", parts) + "]";
        }
        return quote(value.toString());
    }

    /** One event: name, then alternating keys and values. */
    private static synchronized void emit(String event, Object... fields) {
        Map<String, Object> line = new java.util.LinkedHashMap<>();
        line.put("event", event);
        for (int i = 0; i < fields.length; i += 2) {
            line.put((String) fields[i], fields[i + 1]);
        }
        System.out.println(json(line));
        System.out.flush();
    }

    private static List<List<Object>> partitions(Collection<TopicPartition> parts) {
        List<List<Object>> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(List.of(tp.topic(), tp.partition()));
        }
        return out;
    }

    // ---- clients -------------------------------------------------------------------------------

    private static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        return p;
    }

    private static Properties consumerProps(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        return p;
    }

    private static void produce(String bootstrap, String topic, int records, String prefix) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap))) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, null, prefix + i)).get();
            }
        }
    }

    // ---- group: two members share a topic --------------------------------------------------------

    private static void group(String bootstrap, String topic, String group, String protocol, int records)
            throws Exception {
        int members = 2;
        List<Set<TopicPartition>> held = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            held.add(ConcurrentHashMap.newKeySet());
        }
        AtomicInteger consumed = new AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch closed = new CountDownLatch(members);
        List<Thread> threads = new ArrayList<>();
        int partitionCount;
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            partitionCount = d.partitions().size();
        }
        for (int i = 0; i < members; i++) {
            final int member = i;
            Thread t = new Thread(() -> {
                Properties p = consumerProps(bootstrap, group);
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
                p.put(ConsumerConfig.CLIENT_ID_CONFIG, "member-" + member);
                if (protocol.equals("classic")) {
                    p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
                    p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
                }
                try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                    consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                        @Override
                        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                            held.get(member).removeAll(parts);
                            emit("revoked", "member", member, "partitions", partitions(parts));
                        }

                        @Override
                        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                            held.get(member).addAll(parts);
                            emit("assigned", "member", member, "partitions", partitions(parts));
                        }
                    });
                    while (!stop.get()) {
                        ConsumerRecords<String, String> batch = consumer.poll(POLL);
                        for (ConsumerRecord<String, String> r : batch) {
                            emit("record", "member", member, "partition", r.partition(), "offset", r.offset(),
                                 "value", r.value());
                        }
                        if (!batch.isEmpty()) {
                            consumer.commitSync();
                            consumed.addAndGet(batch.count());
                        }
                    }
                    emit("closing", "member", member);
                } catch (Exception e) {
                    emit("error", "member", member, "error", e.toString());
                } finally {
                    closed.countDown();
                }
            });
            t.start();
            threads.add(t);
        }
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        // Produce once both members hold partitions and together all of them: each record then has
        // one owner from the start, so every record is consumed once.
        while (true) {
            Set<TopicPartition> all = new HashSet<>();
            boolean everyone = true;
            int total = 0;
            for (Set<TopicPartition> h : held) {
                everyone &= !h.isEmpty();
                all.addAll(h);
                total += h.size();
            }
            if (everyone && all.size() == partitionCount && total == partitionCount) {
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                emit("error", "error", "the members never shared the partitions");
                stop.set(true);
                closed.await(30, TimeUnit.SECONDS);
                System.exit(1);
            }
            Thread.sleep(50);
        }
        emit("shared", "held", List.of(partitions(held.get(0)), partitions(held.get(1))));
        produce(bootstrap, topic, records, "v");
        while (consumed.get() < records && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        stop.set(true);
        closed.await(30, TimeUnit.SECONDS);
        emit("done", "consumed", consumed.get());
    }

    // ---- transactions: read-process-write, then an abort ---------------------------------------

    private static void transactions(String bootstrap, String in, String out, String group, int records)
            throws Exception {
        produce(bootstrap, in, records, "in-");
        Properties cp = consumerProps(bootstrap, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        Properties pp = producerProps(bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "rpw-" + group);
        int processed = 0;
        int transactions = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (processed < records && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> batch = consumer.poll(POLL);
                if (batch.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : batch) {
                    producer.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase(Locale.ROOT)));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
                processed += batch.count();
            }
            emit("processed", "records", processed, "transactions", transactions);

            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(out, null, "aborted-" + i));
            }
            producer.flush();
            producer.abortTransaction();
            emit("aborted", "records", 5);
        }
        // The transactional id as its coordinator describes it: under transactions version 2
        // every EndTxn moved the epoch by one.
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            var described = admin.describeTransactions(List.of("rpw-" + group)).all().get().get("rpw-" + group);
            emit("transaction", "state", described.state().toString(), "epoch", (int) described.producerEpoch(),
                 "partitions", described.topicPartitions().size());
        }
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            Properties rp = consumerProps(bootstrap, null);
            rp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
            List<String> values = new ArrayList<>();
            try (KafkaConsumer<String, String> reader = new KafkaConsumer<>(rp)) {
                List<TopicPartition> parts = new ArrayList<>();
                reader.partitionsFor(out).forEach(info -> parts.add(new TopicPartition(out, info.partition())));
                reader.assign(parts);
                reader.seekToBeginning(parts);
                Map<TopicPartition, Long> ends = reader.endOffsets(parts);
                long deadline = System.currentTimeMillis() + 30_000;
                while (System.currentTimeMillis() < deadline) {
                    boolean atEnd = true;
                    for (TopicPartition tp : parts) {
                        atEnd &= reader.position(tp) >= ends.get(tp);
                    }
                    if (atEnd) {
                        break;
                    }
                    for (ConsumerRecord<String, String> r : reader.poll(POLL)) {
                        values.add(r.value());
                    }
                }
                emit("read", "isolation", isolation, "values", values, "end_offsets", ends.values());
            }
        }
    }

    // ---- admin ---------------------------------------------------------------------------------

    private static void admin(String bootstrap, String topic, String group) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
            TopicDescription topicDescription = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            emit("topic", "name", topicDescription.name(), "partitions", topicDescription.partitions().size(),
                 "internal", topicDescription.isInternal());

            DescribeClusterResult cluster = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : cluster.nodes().get()) {
                nodes.add(List.of(n.id(), n.host(), n.port()));
            }
            emit("cluster", "cluster_id", cluster.clusterId().get(), "nodes", nodes,
                 "controller", cluster.controller().get().id());

            for (int p = 0; p < 3; p++) {
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap))) {
                    for (int i = 0; i <= p * 2; i++) {
                        producer.send(new ProducerRecord<>(topic, p, null, "r" + i)).get();
                    }
                }
            }
            Properties cp = consumerProps(bootstrap, group);
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                int seen = 0;
                long deadline = System.currentTimeMillis() + DEADLINE_MS;
                while (seen < 9 && System.currentTimeMillis() < deadline) {
                    seen += consumer.poll(POLL).count();
                }
                consumer.commitSync();
                Collection<GroupListing> listed = admin.listGroups().all().get();
                ConsumerGroupDescription active = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                List<Object> members = new ArrayList<>();
                for (MemberDescription m : active.members()) {
                    members.add(Map.of("client_id", m.clientId(), "partitions",
                                       partitions(m.assignment().topicPartitions())));
                }
                emit("described_active", "state", active.groupState().toString(), "members", members,
                     "listed", listed.stream().filter(g -> g.groupId().equals(group))
                                   .map(g -> List.of(g.groupId(), String.valueOf(g.type().orElse(null)),
                                                     g.protocol()))
                                   .toList());
            }

            List<TopicPartition> parts = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1),
                                                 new TopicPartition(topic, 2));
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            for (TopicPartition tp : parts) {
                latest.put(tp, OffsetSpec.latest());
                earliest.put(tp, OffsetSpec.earliest());
            }
            emit("offsets", "latest", offsetsByPartition(admin.listOffsets(latest).all().get()),
                 "earliest", offsetsByPartition(admin.listOffsets(earliest).all().get()));
            emit("committed", "offsets", committedByPartition(
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));

            // Records and log directories: delete below offset 3 of partition 2, then what the
            // log start, the partitions' producers and the log directory show.
            DeletedRecords deleted = admin.deleteRecords(Map.of(new TopicPartition(topic, 2),
                                                                RecordsToDelete.beforeOffset(3)))
                                          .lowWatermarks().get(new TopicPartition(topic, 2)).get();
            emit("deleted_records", "low_watermark", deleted.lowWatermark(),
                 "earliest", offsetsByPartition(admin.listOffsets(earliest).all().get()));
            Map<String, Object> producers = new java.util.TreeMap<>();
            admin.describeProducers(parts).all().get().forEach((tp, state) -> producers.put(
                String.valueOf(tp.partition()), state.activeProducers().stream().map(ps -> List.of(
                    ps.producerEpoch(), ps.lastSequence(), ps.coordinatorEpoch().orElse(-1),
                    ps.currentTransactionStartOffset().orElse(-1L))).toList()));
            emit("producers", "by_partition", producers);
            int node = cluster.nodes().get().iterator().next().id();
            Map<String, Object> replicas = new java.util.TreeMap<>();
            for (LogDirDescription dir : admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node)
                                              .values()) {
                dir.replicaInfos().forEach((tp, info) -> {
                    if (tp.topic().equals(topic)) {
                        replicas.put(String.valueOf(tp.partition()),
                                     List.of(info.size(), info.offsetLag(), info.isFuture()));
                    }
                });
            }
            emit("log_dirs", "replicas", replicas);

            ConsumerGroupDescription empty = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            emit("described_empty", "state", empty.groupState().toString(), "members", empty.members().size());

            admin.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(topic, 2), new OffsetAndMetadata(1)))
                 .all().get();
            emit("altered", "offsets", committedByPartition(
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));

            admin.deleteConsumerGroups(List.of(group)).all().get();
            List<String> left = admin.listGroups().all().get().stream()
                                     .map(GroupListing::groupId).filter(group::equals).toList();
            emit("deleted", "listed", left, "committed", committedByPartition(
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
        }
    }

    private static Map<String, Object> offsetsByPartition(Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> m) {
        Map<String, Object> out = new java.util.TreeMap<>();
        m.forEach((tp, info) -> out.put(String.valueOf(tp.partition()), info.offset()));
        return out;
    }

    private static Map<String, Object> committedByPartition(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, Object> out = new java.util.TreeMap<>();
        m.forEach((tp, o) -> out.put(String.valueOf(tp.partition()), o == null ? null : o.offset()));
        return out;
    }

    private KafkaClients() {
    }
}
