import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java clients with their defaults, for bench/failover.py: one line on stdout per event,
 * read by the bench as it arrives (it notes the time).
 *
 *   produce BOOTSTRAP TOPIC RATE   a KafkaProducer (acks=all, every other setting its default)
 *                                  sending RATE records a second to partition 0: "ack OFFSET" per
 *                                  acknowledged record, "err MESSAGE" per failed one
 *   consume BOOTSTRAP TOPIC GROUP  a KafkaConsumer in GROUP subscribed to TOPIC: "rec OFFSET" with
 *                                  the last offset of every poll that returned records
 *
 * Both run until killed.
 */
public final class FailoverClients {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
            case "consume" -> consume(args[1], args[2], args[3]);
            default -> throw new IllegalArgumentException(args[0]);
        }
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static void produce(String bootstrap, String topic, int rate) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            long started = System.nanoTime();
            long sent = 0;
            while (true) {
                long due = (System.nanoTime() - started) * rate / 1_000_000_000L;
                if (sent >= due) {
                    Thread.sleep(2);
                    continue;
                }
                producer.send(new ProducerRecord<>(topic, 0, null, "v" + sent), (metadata, error) -> {
                    if (error != null) {
                        say("err " + error.toString().replace('\n', ' '));
                    } else {
                        say("ack " + metadata.offset());
                    }
                });
                sent++;
            }
        }
    }

    private static void consume(String bootstrap, String topic, String group) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                long last = -1;
                for (ConsumerRecord<String, String> record : records) {
                    last = Math.max(last, record.offset());
                }
                if (last >= 0) {
                    say("rec " + last);
                }
            }
        }
    }
}
