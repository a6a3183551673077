import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A two-phase commit participant (KIP-939) with Kafka's Java producer, one run per broker, each
 * step's outcome a line "STEP step value" on stdout (the test compares both brokers' lines):
 *
 *   BOOTSTRAP TOPIC TRANSACTIONAL_ID
 *
 * Kafka 4.4.0's producer takes transaction.two.phase.commit.enable (InitProducerId v6 with
 * Enable2Pc) but keeps prepareTransaction, completeTransaction and initTransactions(boolean)
 * internal: the transaction manager has them, the released KafkaProducer does not. Preparing is the
 * client's own step (a flush, no request), so a participant here flushes, and the external
 * coordinator's decision is a commit or an abort. One transaction commits, one aborts, one is left
 * open by a producer that goes away (prepared, its outcome not decided); a new instance aborts it
 * and commits one of its own; read_committed and read_uncommitted readers list the topic, and the
 * transaction and the partition's producers are described. (Kafka 4.4.0's producer sends no
 * Enable2Pc, so the transaction it left has the producer's timeout: nothing here looks at it
 * while it is open, whose outcome would then depend on how soon it is looked at.)
 */
public final class TwoPhaseCommit {
    private static final Duration DEADLINE = Duration.ofSeconds(90);

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String txn = args[2];
        try (KafkaProducer<String, String> first = producer(bootstrap, txn)) {
            first.initTransactions();
            out("init", "ok");
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, "committed-1"));
            first.send(new ProducerRecord<>(topic, 0, null, "committed-2"));
            first.flush();
            first.commitTransaction();
            out("committed", "ok");
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, "aborted-1"));
            first.flush();
            first.abortTransaction();
            out("aborted", "ok");
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, null, "left-prepared"));
            first.flush();
            out("left_prepared", "ok");
        }
        try (KafkaProducer<String, String> next = producer(bootstrap, txn)) {
            next.initTransactions();
            out("reinit", "ok");
            out("described_reinit", described(bootstrap, txn));
            next.beginTransaction();
            next.send(new ProducerRecord<>(topic, 0, null, "next-1"));
            next.flush();
            next.commitTransaction();
            out("next_committed", "ok");
        }
        out("described_end", described(bootstrap, txn));
        out("producers_end", producers(bootstrap, topic));
        out("read_committed", read(bootstrap, topic, "read_committed"));
        out("read_uncommitted", read(bootstrap, topic, "read_uncommitted"));
    }

    private static void out(String step, Object value) {
        System.out.println("STEP " + step + " " + value);
        System.out.flush();
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String txn) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txn);
        p.put(ProducerConfig.TRANSACTION_TWO_PHASE_COMMIT_ENABLE_CONFIG, "true");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "90000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    /** The transaction as the Admin client describes it: state, timeout and partitions. */
    private static String described(String bootstrap, String txn) throws Exception {
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            TransactionDescription d = admin.describeTransactions(List.of(txn)).description(txn).get();
            return d.state() + "/" + d.transactionTimeoutMs() + "/" + d.topicPartitions().size();
        }
    }

    /** The producers of partition 0 (their ids aside: each broker allocates its own): epoch, last
     * sequence, and whether a transaction of theirs is open there. */
    private static List<String> producers(String bootstrap, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        List<String> out = new ArrayList<>();
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            for (ProducerState state : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                out.add(state.producerEpoch() + "/" + state.lastSequence() + "/"
                        + state.currentTransactionStartOffset().isPresent());
            }
        }
        return out;
    }

    /** Every value of partition 0 a reader at ``isolation`` gets, up to the end it may read to. */
    private static List<String> read(String bootstrap, String topic, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Set.of(tp));
            consumer.seekToBeginning(Set.of(tp));
            long end = consumer.endOffsets(Set.of(tp), DEADLINE).get(tp);
            long deadline = System.currentTimeMillis() + DEADLINE.toMillis();
            while (consumer.position(tp, DEADLINE) < end) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("the reader did not reach offset " + end);
                }
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    values.add(r.value());
                }
            }
        }
        return values;
    }
}
