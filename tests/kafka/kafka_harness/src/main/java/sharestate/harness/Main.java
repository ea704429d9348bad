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
 *   golden &lt;outdir&gt;                                  share_group_state.jsonl and consumer_offsets.jsonl
 *   replay-corpus &lt;outdir&gt; --seed S --sequences N    corpus.jsonl.gz + corpus_stats.json (ShareCoordinatorShard)
 *   combiner &lt;outdir&gt; --seed S [--cases N]           combiner.jsonl.gz (PersisterStateBatchCombiner)
 *   replay-bench &lt;corpus-or-records-file&gt; [--warmup W] [--passes P]   Kafka's replay rate, JSON on stdout
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
            case "replay-corpus":
                replayCorpus(kafkaVersion, rest);
                break;
            case "combiner":
                combiner(rest);
                break;
            case "replay-bench":
                replayBench(kafkaVersion, rest);
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

    private static void replayCorpus(String kafkaVersion, String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        Path outDir = Paths.get(args[0]);
        long seed = Long.parseLong(option(args, "--seed", "1"));
        int sequences = Integer.parseInt(option(args, "--sequences", "2000"));
        System.err.println(new ReplayCorpus(kafkaVersion, seed, sequences).generate(outDir));
    }

    private static void combiner(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        Path outDir = Paths.get(args[0]);
        long seed = Long.parseLong(option(args, "--seed", "1"));
        int cases = Integer.parseInt(option(args, "--cases", "4000"));
        System.err.println(new CombinerCases(seed).generate(outDir, cases));
    }

    private static void replayBench(String kafkaVersion, String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        int warmup = Integer.parseInt(option(args, "--warmup", "3"));
        int passes = Integer.parseInt(option(args, "--passes", "5"));
        System.out.println(new ReplayBench().run(kafkaVersion, Paths.get(args[0]), warmup, passes));
    }

    /** The value after {@code name} in args (options come after the positional argument), or a default. */
    private static String option(String[] args, String name, String dflt) {
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals(name)) {
                if (i + 1 >= args.length) {
                    usage();
                }
                return args[i + 1];
            }
            if (args[i].startsWith("--") && i + 1 < args.length) {
                i++;
            }
        }
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                usage();
            }
        }
        return dflt;
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
        System.err.println("usage: Main golden <outdir>\n"
            + "       Main replay-corpus <outdir> --seed S --sequences N\n"
            + "       Main combiner <outdir> --seed S [--cases N]\n"
            + "       Main replay-bench <corpus.jsonl.gz | records.jsonl> [--warmup W] [--passes P]");
        System.exit(2);
    }
}
