package sharestate.broker;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A steady share-group workload, for following the state topic while it is written: a
 * producer writes RATE records a second to TOPIC for SECONDS, and GROUPS share groups of
 * CONSUMERS consumers each read them, accepting most, releasing some and rejecting a few,
 * until the producer is done and nothing has come for a few seconds. Writes what it did to
 * OUT_JSON. With DELETE "delete", the groups are deleted at the end (their share state
 * tombstoned, so it no longer holds back the state topic's pruning). Unlike Driver (a fixed
 * scenario, run once per broker) it can run again on the same broker: a new SEED makes new
 * group names.
 */
public final class Workload {
    private static final long IDLE_MS = 3000;

    public static void main(String[] args) throws Exception {
        if (args.length != 9) {
            System.err.println(
                "usage: Workload BOOTSTRAP TOPIC GROUPS CONSUMERS RATE SECONDS SEED OUT_JSON DELETE");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int groups = Integer.parseInt(args[2]);
        int consumers = Integer.parseInt(args[3]);
        int rate = Integer.parseInt(args[4]);
        int seconds = Integer.parseInt(args[5]);
        long seed = Long.parseLong(args[6]);
        Path out = Path.of(args[7]);
        boolean delete = args[8].equals("delete");

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        List<String> groupIds = new ArrayList<>();
        try (Admin admin = Admin.create(adminProps)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            for (int g = 0; g < groups; g++) {
                String group = "w" + seed + "-g" + g;
                groupIds.add(group);
                ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
                AlterConfigOp op = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get();
            }
        }

        AtomicLong produced = new AtomicLong();
        AtomicLong accepted = new AtomicLong();
        AtomicLong released = new AtomicLong();
        AtomicLong rejected = new AtomicLong();
        long start = System.currentTimeMillis();
        long produceUntil = start + seconds * 1000L;
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        for (String group : groupIds) {
            for (int c = 0; c < consumers; c++) {
                Random random = new Random(seed * 1000 + threads.size());
                String client = group + "-c" + c;
                threads.add(new Thread(() -> {
                    try {
                        consume(bootstrap, topic, group, client, random, produceUntil,
                            accepted, released, rejected);
                    } catch (Throwable t) {
                        failures.add(t);
                    }
                }, client));
            }
        }
        threads.forEach(Thread::start);

        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer())) {
            // A tenth of a second's records at a time, on time.
            long tick = 0;
            while (System.currentTimeMillis() < produceUntil) {
                for (int i = 0; i < Math.max(1, rate / 10); i++) {
                    long n = produced.getAndIncrement();
                    producer.send(new ProducerRecord<>(topic, "k" + n, "v" + n));
                }
                tick++;
                long wait = start + tick * 100 - System.currentTimeMillis();
                if (wait > 0) {
                    Thread.sleep(wait);
                }
            }
            producer.flush();
        }
        for (Thread thread : threads) {
            thread.join(Duration.ofSeconds(seconds + 120L).toMillis());
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("a consumer failed", failures.get(0));
        }
        if (delete) {
            deleteGroups(adminProps, groupIds);
        }
        String json = String.format(
            "{\"topic\": \"%s\", \"groups\": %d, \"consumers_per_group\": %d, \"rate\": %d, "
                + "\"seconds\": %d, \"produced\": %d, \"accepted\": %d, \"released\": %d, "
                + "\"rejected\": %d, \"deleted\": %b, \"elapsed_ms\": %d}%n",
            topic, groups, consumers, rate, seconds, produced.get(), accepted.get(), released.get(),
            rejected.get(), delete, System.currentTimeMillis() - start);
        Files.writeString(out, json, StandardCharsets.UTF_8);
        System.out.print(json);
    }

    /** Delete the groups once their members have left (a group with members is refused). */
    private static void deleteGroups(Properties adminProps, List<String> groupIds) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        try (Admin admin = Admin.create(adminProps)) {
            while (true) {
                try {
                    admin.deleteShareGroups(groupIds).all().get();
                    return;
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof GroupNotEmptyException)
                            || System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(500);
                }
            }
        }
    }

    private static void consume(String bootstrap, String topic, String group, String client,
            Random random, long produceUntil, AtomicLong accepted, AtomicLong released,
            AtomicLong rejected) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, client);
        props.put("share.acknowledgement.mode", "explicit");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        long lastRecord = System.currentTimeMillis();
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                long now = System.currentTimeMillis();
                if (records.isEmpty()) {
                    if (now > produceUntil && now - lastRecord > IDLE_MS) {
                        return;
                    }
                    continue;
                }
                lastRecord = now;
                for (ConsumerRecord<String, String> record : records) {
                    double r = random.nextDouble();
                    AcknowledgeType type = r < 0.85 ? AcknowledgeType.ACCEPT
                        : r < 0.95 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT;
                    consumer.acknowledge(record, type);
                    (type == AcknowledgeType.ACCEPT ? accepted
                        : type == AcknowledgeType.RELEASE ? released : rejected).incrementAndGet();
                }
                consumer.commitSync(Duration.ofSeconds(30));
            }
        }
    }
}
