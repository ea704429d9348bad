package sharestate.harness;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Properties;

/**
 * Entry point of the Kafka harness. Subcommands:
 * <pre>
 *   golden &lt;outdir&gt;   write share_group_state.jsonl and consumer_offsets.jsonl into outdir
 * </pre>
 * Run with exactly one Kafka release's jars on the classpath. If the system property
 * {@code sharestate.kafka.version} is set, the Kafka version on the classpath must match it.
 */
public final class Main {
    private Main() { }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        String kafkaVersion = kafkaClientsVersion();
        String expected = System.getProperty("sharestate.kafka.version");
        if (expected != null && !expected.equals(kafkaVersion)) {
            throw new IllegalStateException("kafka-clients on the classpath is " + kafkaVersion + ", expected " + expected);
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "golden":
                golden(kafkaVersion, rest);
                break;
            default:
                usage();
        }
    }

    private static void golden(String kafkaVersion, String[] args) throws Exception {
        if (args.length != 1) {
            usage();
        }
        Path outDir = Paths.get(args[0]);
        Files.createDirectories(outDir);
        System.err.println("Kafka " + kafkaVersion + " (keys carry version = record type: "
            + Compat.KEY_VERSION_IS_RECORD_TYPE + ")");
        System.err.println(new ShareStateGolden(outDir.resolve("share_group_state.jsonl")).generate());
        System.err.println(new ConsumerOffsetsGolden(outDir.resolve("consumer_offsets.jsonl")).generate());
    }

    /**
     * The version of kafka-clients on the classpath, from the resource its AppInfoParser reads
     * (that class moved to an internals package in 4.4, so it is not called directly).
     */
    static String kafkaClientsVersion() throws IOException {
        try (InputStream in = Main.class.getClassLoader().getResourceAsStream("kafka/kafka-version.properties")) {
            if (in == null) {
                throw new IllegalStateException("kafka-clients is not on the classpath");
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version");
        }
    }

    private static void usage() {
        System.err.println("usage: Main golden <outdir>");
        System.exit(2);
    }
}
