package relaybench;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * relay-bench's mode (k): Kafka Streams reading a source topic and writing
 * every record, bytes untouched, to a sink topic, with
 * processing.guarantee=exactly_once_v2 and commit.interval.ms=100. All other
 * settings are Kafka Streams' defaults (one stream thread, its producer and
 * consumer defaults).
 *
 * <p>It prints its state changes on stdout ("relay-bench-streams: state
 * REBALANCING -> RUNNING"); Kafka Streams' own log (slf4j-simple, see
 * simplelogger.properties) has warnings and errors only. SIGTERM closes it
 * cleanly. It exits 1 when a stream thread fails.
 */
public final class StreamsPassthrough {
    private static final String NAME = "relay-bench-streams";

    private StreamsPassthrough() {
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 5) {
            System.err.println("usage: " + NAME + " BOOTSTRAP APPLICATION_ID SOURCE_TOPIC SINK_TOPIC STATE_DIR");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .to(args[3], Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        Topology topology = builder.build();
        System.out.println(NAME + ": " + StreamsConfig.PROCESSING_GUARANTEE_CONFIG + "=" + StreamsConfig.EXACTLY_ONCE_V2
            + " " + StreamsConfig.COMMIT_INTERVAL_MS_CONFIG + "=100");
        System.out.print(NAME + ": " + topology.describe());

        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch over = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println(NAME + ": state " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                over.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println(NAME + ": stream thread failed: " + e);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            System.out.println(NAME + ": closed");
        }, NAME + "-shutdown"));
        streams.start();

        over.await();
        if (streams.state() == KafkaStreams.State.ERROR) {
            System.exit(1);
        }
    }
}
