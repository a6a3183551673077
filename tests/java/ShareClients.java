import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's KafkaShareConsumer against a broker, every result a JSON line on stdout:
 *
 *   share BOOTSTRAP TOPIC GROUP RECORDS   two share consumers in one group on TOPIC; RECORDS records
 *                                         produced once both have fetched; each accepted, except
 *                                         the first delivery of "r0", which is released
 */
public final class ShareClients {
    private static final long DEADLINE_MS = 60_000;

    public static void main(String[] args) throws Exception {
        if (!"share".equals(args[0])) {
            throw new IllegalArgumentException("unknown scenario " + args[0]);
        }
        share(args[1], args[2], args[3], Integer.parseInt(args[4]));
    }

    private static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String clientId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaShareConsumer<>(p);
    }

    private static void share(String bootstrap, String topic, String group, int records) throws Exception {
        Map<String, Integer> accepted = new ConcurrentHashMap<>();
        Map<String, Integer> counts = new ConcurrentHashMap<>();
        AtomicBoolean released = new AtomicBoolean(false);
        AtomicBoolean stop = new AtomicBoolean(false);
        List<Thread> threads = new ArrayList<>();
        java.util.concurrent.CountDownLatch fetched = new java.util.concurrent.CountDownLatch(2);
        for (String name : List.of("a", "b")) {
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, name)) {
                    c.subscribe(List.of(topic));
                    long until = System.currentTimeMillis() + 3000;
                    while (System.currentTimeMillis() < until) {
                        c.poll(Duration.ofMillis(200));
                    }
                    fetched.countDown();
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            short count = r.deliveryCount().orElse((short) -1);
                            counts.merge(r.value(), 1, Integer::sum);
                            if (r.value().equals("r0") && released.compareAndSet(false, true)) {
                                c.acknowledge(r, AcknowledgeType.RELEASE);
                                continue;
                            }
                            if (r.value().equals("r0")) {
                                System.out.println("{\"event\":\"redelivered\",\"value\":\"r0\",\"delivery_count\":" + count + "}");
                            }
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                            accepted.merge(r.value(), 1, Integer::sum);
                        }
                        c.commitSync();
                    }
                } catch (Exception e) {
                    System.out.println("{\"event\":\"error\",\"message\":\"" + e.toString().replace("\"", "'") + "\"}");
                }
            });
            t.start();
            threads.add(t);
        }
        fetched.await();
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, "r" + i)).get();
            }
        }
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (accepted.size() < records && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        int twice = 0;
        for (int n : accepted.values()) {
            if (n > 1) {
                twice++;
            }
        }
        System.out.println("{\"event\":\"share\",\"accepted\":" + accepted.size() + ",\"accepted_twice\":" + twice
                           + ",\"deliveries\":" + counts.values().stream().mapToInt(Integer::intValue).sum() + "}");
    }
}
