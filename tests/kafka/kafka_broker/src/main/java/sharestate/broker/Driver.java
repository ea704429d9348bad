package sharestate.broker;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The share-group scenario run against a live single-node broker (tests/kafka/test_kafka_broker.py).
 *
 * <p>Creates topics, produces records, runs share consumers of several groups in explicit
 * acknowledgement mode with a seeded random mix of ACCEPT / RELEASE / REJECT, lets acquisition
 * locks time out, drives "poison" records to the delivery-count limit, then alters the offsets of
 * an empty group, deletes one topic's offsets of a group, deletes a group and a topic, waits for
 * {@code __share_group_state} to go quiet, and reads everything back through Admin. Everything it
 * did and everything Admin reported goes into one JSON file.
 *
 * <p>Usage: {@code Driver BOOTSTRAP OUT_JSON SEED DELIVERY_COUNT_LIMIT LOCK_DURATION_MS QUIET_MS}
 */
public final class Driver {

    static final String STATE_TOPIC = "__share_group_state";

    /** One group's part in the scenario. */
    record GroupPlan(String group, List<String> topics, int consumers, int budgetPerConsumer,
                     double stallProbability) { }

    private final Admin admin;
    private final String bootstrap;
    private final long seed;
    private final int deliveryCountLimit;
    private final int lockDurationMs;
    private final long quietMs;
    private final List<Map<String, Object>> events = Collections.synchronizedList(new ArrayList<>());
    private final List<Map<String, Object>> operations = new ArrayList<>();
    private final Map<String, Object> out = new LinkedHashMap<>();
    private final Map<String, String> topicIds = new TreeMap<>();

    private Driver(String bootstrap, long seed, int deliveryCountLimit, int lockDurationMs, long quietMs) {
        this.bootstrap = bootstrap;
        this.seed = seed;
        this.deliveryCountLimit = deliveryCountLimit;
        this.lockDurationMs = lockDurationMs;
        this.quietMs = quietMs;
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: Driver BOOTSTRAP OUT_JSON SEED DELIVERY_COUNT_LIMIT LOCK_DURATION_MS QUIET_MS");
            System.exit(2);
        }
        Driver driver = new Driver(args[0], Long.parseLong(args[2]), Integer.parseInt(args[3]),
            Integer.parseInt(args[4]), Long.parseLong(args[5]));
        try {
            driver.run(Path.of(args[1]));
        } finally {
            driver.admin.close(Duration.ofSeconds(10));
        }
    }

    private void run(Path outFile) throws Exception {
        long started = System.currentTimeMillis();
        out.put("kafka_version", clientsVersion());
        out.put("seed", seed);
        out.put("delivery_count_limit", deliveryCountLimit);
        out.put("lock_duration_ms", lockDurationMs);
        waitForCluster();

        Map<String, Integer> partitions = new LinkedHashMap<>();
        partitions.put("orders", 3);
        partitions.put("payments", 2);
        partitions.put("doomed", 2);
        createTopics(partitions);

        List<GroupPlan> plans = List.of(
            new GroupPlan("g-main", List.of("orders", "payments", "doomed"), 2, 220, 0.06),
            new GroupPlan("g-second", List.of("orders"), 1, 160, 0.06),
            new GroupPlan("g-reset", List.of("payments"), 1, 100, 0.0),
            new GroupPlan("g-deleted", List.of("payments"), 1, 60, 0.0),
            new GroupPlan("g-offsets-deleted", List.of("orders", "payments"), 1, 120, 0.0));
        for (GroupPlan plan : plans) {
            // Share groups start at the latest offset unless told otherwise.
            setGroupConfig(plan.group(), "share.auto.offset.reset", "earliest");
        }

        Map<String, Map<Integer, Integer>> produced = new TreeMap<>();
        produce(Map.of("orders", 120, "payments", 80, "doomed", 40), produced);

        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        int consumerNumber = 0;
        for (GroupPlan plan : plans) {
            for (int i = 0; i < plan.consumers(); i++) {
                long consumerSeed = seed * 1000 + consumerNumber++;
                String clientId = plan.group() + "-c" + i;
                Thread thread = new Thread(() -> {
                    try {
                        consume(plan, clientId, consumerSeed);
                    } catch (Throwable t) {
                        failures.add(t);
                    }
                }, clientId);
                threads.add(thread);
                thread.start();
            }
        }
        for (Thread thread : threads) {
            thread.join(TimeUnit.MINUTES.toMillis(3));
            if (thread.isAlive()) {
                throw new IllegalStateException("consumer thread " + thread.getName() + " did not finish");
            }
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("a consumer failed", failures.get(0));
        }

        // A tail no group has read: start offsets stay behind the end, so lag is positive.
        produce(Map.of("orders", 25), produced);
        out.put("produced", produced);

        waitForEmpty(List.of("g-reset", "g-deleted", "g-offsets-deleted"));
        // g-reset: one partition backwards, one forwards (the group is empty, as Kafka requires).
        Map<TopicPartition, Long> reset = new LinkedHashMap<>();
        reset.put(new TopicPartition("payments", 0), 5L);
        reset.put(new TopicPartition("payments", 1), 70L);
        Map<String, Object> alter = operation("alterShareGroupOffsets", "g-reset");
        alter.put("offsets", Map.of("payments-0", 5L, "payments-1", 70L));
        alter.put("result", outcome(() -> admin.alterShareGroupOffsets("g-reset", reset).all()));

        Map<String, Object> deleteOffsets = operation("deleteShareGroupOffsets", "g-offsets-deleted");
        deleteOffsets.put("topics", List.of("payments"));
        deleteOffsets.put("result", outcome(() ->
            admin.deleteShareGroupOffsets("g-offsets-deleted", Set.of("payments")).all()));

        Map<String, Object> deleteGroup = operation("deleteShareGroups", "g-deleted");
        deleteGroup.put("result", outcome(() -> admin.deleteShareGroups(List.of("g-deleted")).all()));

        Map<String, Object> deleteTopic = operation("deleteTopics", null);
        deleteTopic.put("topics", List.of("doomed"));
        deleteTopic.put("topic_id", topicIds.get("doomed"));
        deleteTopic.put("result", outcome(() -> admin.deleteTopics(List.of("doomed")).all()));
        waitForTopicGone("doomed");

        Map<String, Object> quiet = waitForQuietStateTopic();
        out.put("topics", topicsJson(partitions));
        out.put("operations", operations);
        out.put("events", new ArrayList<>(events));
        out.put("state_topic", quiet);
        out.put("end_offsets", endOffsets(List.of("orders", "payments")));
        out.put("admin", readBack(plans));
        out.put("elapsed_ms", System.currentTimeMillis() - started);
        Files.writeString(outFile, Json.write(out) + "\n", StandardCharsets.UTF_8);
    }

    // ---------------------------------------------------------------- set-up

    /** The kafka-clients release on the classpath (what AppInfoParser logs). */
    private static String clientsVersion() throws IOException {
        Properties props = new Properties();
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                props.load(in);
            }
        }
        return props.getProperty("version", "unknown");
    }

    private void waitForCluster() throws InterruptedException {
        long deadline = System.currentTimeMillis() + 60000;
        while (true) {
            try {
                admin.describeCluster().nodes().get(5, TimeUnit.SECONDS);
                return;
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("broker not reachable at " + bootstrap, e);
                }
                Thread.sleep(500);
            }
        }
    }

    private void createTopics(Map<String, Integer> partitions) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        partitions.forEach((name, count) -> topics.add(new NewTopic(name, count, (short) 1)));
        admin.createTopics(topics).all().get();
        Map<String, TopicDescription> described = admin.describeTopics(partitions.keySet()).allTopicNames().get();
        described.forEach((name, d) -> topicIds.put(name, d.topicId().toString()));
    }

    private void setGroupConfig(String group, String name, String value) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
    }

    private void produce(Map<String, Integer> perPartition, Map<String, Map<Integer, Integer>> produced)
            throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            for (Map.Entry<String, Integer> entry : new TreeMap<>(perPartition).entrySet()) {
                String topic = entry.getKey();
                int count = producer.partitionsFor(topic).size();
                for (int p = 0; p < count; p++) {
                    for (int i = 0; i < entry.getValue(); i++) {
                        producer.send(new ProducerRecord<>(topic, p, "k" + i, topic + "-" + p + "-" + i));
                    }
                    produced.computeIfAbsent(topic, t -> new TreeMap<>()).merge(p, entry.getValue(), Integer::sum);
                }
            }
            producer.flush();
        }
    }

    // ---------------------------------------------------------------- consumers

    /** Records whose offset is 3 modulo 11 are always released: they reach the delivery-count limit. */
    static boolean poison(long offset) {
        return offset % 11 == 3;
    }

    private void consume(GroupPlan plan, String clientId, long consumerSeed) throws InterruptedException {
        Random random = new Random(consumerSeed);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, plan.group());
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("share.acquire.mode", "record_limit");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10);
        int processed = 0;
        int idle = 0;
        long deadline = System.currentTimeMillis() + 90000;
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(plan.topics());
            while (processed < plan.budgetPerConsumer() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    // Before the first delivery the group may still be assigning partitions.
                    if (processed > 0 && ++idle >= 8) {
                        break;
                    }
                    continue;
                }
                idle = 0;
                boolean stall = random.nextDouble() < plan.stallProbability();
                List<Map<String, Object>> round = new ArrayList<>();
                if (stall) {
                    // Hold the records past their acquisition lock, then try to accept them.
                    Thread.sleep(lockDurationMs + 1500L);
                }
                for (ConsumerRecord<String, String> record : records) {
                    String action;
                    AcknowledgeType type;
                    if (stall) {
                        action = "TIMEOUT";
                        type = AcknowledgeType.ACCEPT;
                    } else if (poison(record.offset())) {
                        action = "RELEASE";
                        type = AcknowledgeType.RELEASE;
                    } else {
                        double r = random.nextDouble();
                        type = r < 0.75 ? AcknowledgeType.ACCEPT : r < 0.9 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT;
                        action = type.name();
                    }
                    consumer.acknowledge(record, type);
                    Map<String, Object> event = new LinkedHashMap<>();
                    event.put("group", plan.group());
                    event.put("client", clientId);
                    event.put("topic", record.topic());
                    event.put("partition", record.partition());
                    event.put("offset", record.offset());
                    event.put("delivery_count", record.deliveryCount().map(Short::intValue).orElse(-1));
                    event.put("action", action);
                    event.put("time_ms", System.currentTimeMillis());
                    round.add(event);
                    processed++;
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync(Duration.ofSeconds(30));
                Map<String, String> errors = new HashMap<>();
                results.forEach((tip, error) -> error.ifPresent(e ->
                    errors.put(tip.topic() + "-" + tip.partition(), e.getClass().getSimpleName() + ": " + e.getMessage())));
                for (Map<String, Object> event : round) {
                    String error = errors.get(event.get("topic") + "-" + event.get("partition"));
                    event.put("ok", error == null);
                    event.put("error", error);
                    events.add(event);
                }
            }
        }
    }

    // ---------------------------------------------------------------- admin operations

    private Map<String, Object> operation(String name, String group) {
        Map<String, Object> op = new LinkedHashMap<>();
        op.put("op", name);
        if (group != null) {
            op.put("group", group);
        }
        op.put("time_ms", System.currentTimeMillis());
        operations.add(op);
        return op;
    }

    private static String outcome(Supplier<org.apache.kafka.common.KafkaFuture<Void>> call) {
        try {
            call.get().get(30, TimeUnit.SECONDS);
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
        } catch (Exception e) {
            return e.getClass().getSimpleName() + ": " + e.getMessage();
        }
    }

    private void waitForEmpty(Collection<String> groups) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (true) {
            Map<String, ShareGroupDescription> described = admin.describeShareGroups(groups).all().get();
            if (described.values().stream().allMatch(d -> d.members().isEmpty())) {
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("groups still have members: " + described);
            }
            Thread.sleep(500);
        }
    }

    private void waitForTopicGone(String topic) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (admin.listTopics().names().get().contains(topic)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("topic " + topic + " still listed");
            }
            Thread.sleep(300);
        }
    }

    /**
     * Waits until no record has been appended to __share_group_state for quietMs (cold-partition
     * snapshots and pruning run on timers), and returns its log start and end offsets then.
     */
    private Map<String, Object> waitForQuietStateTopic() throws Exception {
        int partitions = admin.describeTopics(List.of(STATE_TOPIC)).allTopicNames().get()
            .get(STATE_TOPIC).partitions().size();
        Map<Integer, Long> last = offsets(STATE_TOPIC, partitions, OffsetSpec.latest());
        long lastChange = System.currentTimeMillis();
        long deadline = lastChange + 120000;
        while (System.currentTimeMillis() - lastChange < quietMs) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(STATE_TOPIC + " never went quiet");
            }
            Thread.sleep(500);
            Map<Integer, Long> now = offsets(STATE_TOPIC, partitions, OffsetSpec.latest());
            if (!now.equals(last)) {
                last = now;
                lastChange = System.currentTimeMillis();
            }
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("partitions", partitions);
        result.put("log_start_offsets", keysAsStrings(offsets(STATE_TOPIC, partitions, OffsetSpec.earliest())));
        result.put("end_offsets", keysAsStrings(last));
        result.put("quiet_ms", quietMs);
        return result;
    }

    private Map<Integer, Long> offsets(String topic, int partitions, OffsetSpec spec) throws Exception {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        for (int p = 0; p < partitions; p++) {
            request.put(new TopicPartition(topic, p), spec);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result = admin.listOffsets(request).all().get();
        Map<Integer, Long> byPartition = new TreeMap<>();
        result.forEach((tp, info) -> byPartition.put(tp.partition(), info.offset()));
        return byPartition;
    }

    private static Map<String, Object> keysAsStrings(Map<Integer, Long> map) {
        Map<String, Object> result = new LinkedHashMap<>();
        map.forEach((k, v) -> result.put(String.valueOf(k), v));
        return result;
    }

    private Map<String, Object> endOffsets(List<String> topics) throws Exception {
        Map<String, Object> result = new TreeMap<>();
        for (String topic : topics) {
            int partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            result.put(topic, keysAsStrings(offsets(topic, partitions, OffsetSpec.latest())));
        }
        return result;
    }

    private Map<String, Object> topicsJson(Map<String, Integer> partitions) {
        Map<String, Object> result = new TreeMap<>();
        partitions.forEach((name, count) -> {
            Map<String, Object> t = new LinkedHashMap<>();
            t.put("topic_id", topicIds.get(name));
            t.put("partitions", count);
            t.put("deleted", name.equals("doomed"));
            result.put(name, t);
        });
        return result;
    }

    // ---------------------------------------------------------------- read-back

    private Map<String, Object> readBack(List<GroupPlan> plans) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        List<Object> listed = new ArrayList<>();
        for (GroupListing listing : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
            Map<String, Object> g = new LinkedHashMap<>();
            g.put("group", listing.groupId());
            g.put("state", listing.groupState().map(Object::toString).orElse(null));
            listed.add(g);
        }
        result.put("list_groups", listed);

        Map<String, Object> offsets = new TreeMap<>();
        Map<String, Object> descriptions = new TreeMap<>();
        for (GroupPlan plan : plans) {
            String group = plan.group();
            Map<String, Object> entry = new LinkedHashMap<>();
            try {
                Map<TopicPartition, SharePartitionOffsetInfo> info = admin
                    .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
                List<Object> rows = new ArrayList<>();
                new TreeMap<String, TopicPartition>(toKeys(info.keySet())).forEach((k, tp) -> {
                    SharePartitionOffsetInfo value = info.get(tp);
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("topic", tp.topic());
                    row.put("topic_id", topicIds.get(tp.topic()));
                    row.put("partition", tp.partition());
                    row.put("start_offset", value == null ? null : value.startOffset());
                    row.put("leader_epoch", value == null ? null : value.leaderEpoch().orElse(null));
                    row.put("lag", value == null ? null : value.lag().orElse(null));
                    rows.add(row);
                });
                entry.put("partitions", rows);
            } catch (ExecutionException e) {
                entry.put("error", e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            offsets.put(group, entry);

            Map<String, Object> described = new LinkedHashMap<>();
            try {
                ShareGroupDescription d = admin.describeShareGroups(List.of(group)).describedGroups()
                    .get(group).get(30, TimeUnit.SECONDS);
                described.put("state", d.groupState().toString());
                described.put("group_epoch", d.groupEpoch());
                described.put("target_assignment_epoch", d.targetAssignmentEpoch());
                List<Object> members = new ArrayList<>();
                for (ShareMemberDescription m : d.members()) {
                    members.add(Map.of("member_id", m.consumerId(), "client_id", m.clientId()));
                }
                described.put("members", members);
            } catch (ExecutionException e) {
                described.put("error", e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            descriptions.put(group, described);
        }
        result.put("list_share_group_offsets", offsets);
        result.put("describe_share_groups", descriptions);
        return result;
    }

    private static Map<String, TopicPartition> toKeys(Collection<TopicPartition> partitions) {
        Map<String, TopicPartition> keys = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            keys.put(tp.topic() + "-" + String.format("%05d", tp.partition()), tp);
        }
        return keys;
    }

    // ---------------------------------------------------------------- JSON

    /** Just enough JSON for maps, lists, strings, numbers, booleans and null. */
    static final class Json {
        static String write(Object value) {
            StringBuilder sb = new StringBuilder();
            write(sb, value);
            return sb.toString();
        }

        private static void write(StringBuilder sb, Object value) {
            if (value == null) {
                sb.append("null");
            } else if (value instanceof Map<?, ?> map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : map.entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (value instanceof Collection<?> list) {
                sb.append('[');
                boolean first = true;
                for (Object item : list) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    write(sb, item);
                }
                sb.append(']');
            } else if (value instanceof Number || value instanceof Boolean) {
                sb.append(value);
            } else {
                string(sb, value.toString());
            }
        }

        private static void string(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                    }
                }
            }
            sb.append('"');
        }
    }

}
