import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Pattern;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count (a repartition by word, a counting state store with its changelog,
 * exactly_once_v2) on the streams rebalance protocol (group.protocol=streams):
 *
 *   StreamsWordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [regex]
 *
 * With "regex", INPUT is a regular expression of source topics (and an uncaught error shuts the
 * instance down instead of replacing its thread, so that it is reported once).
 * Prints one JSON line per state change ({"event":"state","state":"RUNNING"}) and, every 500 ms,
 * the active and standby tasks of this instance ({"event":"tasks","active":[...],"standby":[...]}).
 * Runs until killed; SIGTERM closes it cleanly.
 */
public final class StreamsWordCount {
    private StreamsWordCount() {
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String applicationId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
        boolean regex = args.length > 5 && args[5].equals("regex");

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);

        StreamsBuilder builder = new StreamsBuilder();
        Consumed<String, String> consumed = Consumed.with(Serdes.String(), Serdes.String());
        (regex ? builder.stream(Pattern.compile(input), consumed) : builder.stream(input, consumed))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> emit("{\"event\":\"state\",\"state\":\"" + now + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            emit("{\"event\":\"uncaught\",\"error\":\"" + String.valueOf(e).replace("\"", "'").replace("\n", " ") + "\"}");
            return regex
                ? org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT
                : org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            closed.countDown();
        }));
        streams.start();
        while (!closed.await(500, java.util.concurrent.TimeUnit.MILLISECONDS)) {
            TreeSet<String> active = new TreeSet<>();
            TreeSet<String> standby = new TreeSet<>();
            try {
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : thread.activeTasks()) {
                        active.add("\"" + task.taskId() + "\"");
                    }
                    for (TaskMetadata task : thread.standbyTasks()) {
                        standby.add("\"" + task.taskId() + "\"");
                    }
                }
            } catch (RuntimeException e) {
                continue;
            }
            emit("{\"event\":\"tasks\",\"state\":\"" + streams.state() + "\",\"active\":[" + String.join(",", active)
                 + "],\"standby\":[" + String.join(",", standby) + "]}");
        }
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
