package sharestate.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecordSerde;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;

/**
 * Writes one golden JSON-lines file. For each case it builds Kafka's generated key/value
 * messages (from JSON, via the generated JsonConverter), wraps them in a CoordinatorRecord the
 * way the release does, serializes with the release's CoordinatorRecordSerde, and checks:
 * <ol>
 *   <li>the key starts with the int16 record type and the value with the int16 value version;</li>
 *   <li>the serde's deserialize() gives back an equal record, which re-serializes to the same bytes
 *       and renders to the same JSON;</li>
 *   <li>reading the key/value body with the generated message consumes exactly all bytes;</li>
 *   <li>(4.1+) the key's apiKey() is the record type.</li>
 * </ol>
 * Any failure throws, so generation stops loudly.
 */
final class GoldenWriter implements AutoCloseable {
    private final Path file;
    private final BufferedWriter out;
    private final CoordinatorRecordSerde serde;
    private final String generatedPackage;
    private final Set<String> caseNames = new HashSet<>();
    private int records;
    private int tombstones;
    private int helperChecks;

    GoldenWriter(Path file, CoordinatorRecordSerde serde, String generatedPackage) {
        this.file = file;
        this.serde = serde;
        this.generatedPackage = generatedPackage;
        try {
            this.out = Files.newBufferedWriter(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Writes a record with a value. {@code recordName} is e.g. "ShareSnapshot" (classes ShareSnapshotKey/Value). */
    CoordinatorRecord value(String caseName, int recordType, String recordName, ObjectNode keyJson,
                            int valueVersion, ObjectNode valueJson) {
        short keyVersion = Compat.keyVersion(recordType);
        ApiMessage key = Messages.read(generatedPackage + "." + recordName + "Key", keyJson, keyVersion);
        ApiMessage value = Messages.read(generatedPackage + "." + recordName + "Value", valueJson, (short) valueVersion);
        CoordinatorRecord record = Compat.record(recordType, key, value, (short) valueVersion);
        emit(caseName, recordType, record, key, value, (short) valueVersion);
        return record;
    }

    /** Writes a tombstone: the key of {@code recordName} with a null value. */
    CoordinatorRecord tombstone(String caseName, int recordType, String recordName, ObjectNode keyJson) {
        short keyVersion = Compat.keyVersion(recordType);
        ApiMessage key = Messages.read(generatedPackage + "." + recordName + "Key", keyJson, keyVersion);
        CoordinatorRecord record = Compat.tombstone(recordType, key);
        emit(caseName, recordType, record, key, null, (short) -1);
        return record;
    }

    /**
     * Cross-check: a record built by one of Kafka's own helper factories must serialize to the
     * same key and value bytes as the record this harness wrote.
     */
    void expectSameBytesAsKafkaHelper(String caseName, CoordinatorRecord ours, CoordinatorRecord fromHelper) {
        byte[] k1 = serde.serializeKey(ours);
        byte[] k2 = serde.serializeKey(fromHelper);
        byte[] v1 = serde.serializeValue(ours);
        byte[] v2 = serde.serializeValue(fromHelper);
        if (!Arrays.equals(k1, k2) || !Arrays.equals(v1, v2)) {
            throw new IllegalStateException(caseName + ": Kafka helper factory gives different bytes:\n"
                + " harness key " + hex(k1) + " value " + hex(v1) + "\n"
                + " helper  key " + hex(k2) + " value " + hex(v2) + "\n helper record: " + fromHelper);
        }
        helperChecks++;
    }

    private void emit(String caseName, int recordType, CoordinatorRecord record, ApiMessage key,
                      ApiMessage value, short valueVersion) {
        if (!caseNames.add(caseName)) {
            throw new IllegalStateException("duplicate case name " + caseName + " in " + file);
        }
        short keyVersion = Compat.keyVersionOf(record);
        byte[] keyBytes = serde.serializeKey(record);
        byte[] valueBytes = serde.serializeValue(record);

        // 1. Prefixes.
        check(caseName, ByteBuffer.wrap(keyBytes).getShort() == recordType, "key prefix is not the record type");
        if (value == null) {
            check(caseName, valueBytes == null, "tombstone serialized to non-null value");
        } else {
            check(caseName, ByteBuffer.wrap(valueBytes).getShort() == valueVersion, "value prefix is not the value version");
        }
        // 4. 4.1+: the generated key knows its record type.
        if (!Compat.KEY_VERSION_IS_RECORD_TYPE) {
            check(caseName, key.apiKey() == recordType, "key.apiKey() " + key.apiKey() + " != record type");
        }

        // 2. Round trip through the same serde.
        CoordinatorRecord back = serde.deserialize(ByteBuffer.wrap(keyBytes),
            valueBytes == null ? null : ByteBuffer.wrap(valueBytes));
        check(caseName, record.equals(back), "deserialize(serialize(r)) != r:\n  " + record + "\n  " + back);
        check(caseName, Arrays.equals(keyBytes, serde.serializeKey(back)), "key re-serialization differs");
        check(caseName, Arrays.equals(valueBytes, serde.serializeValue(back)), "value re-serialization differs");

        JsonNode keyJson = Messages.write(key, keyVersion);
        check(caseName, keyJson.equals(Messages.write(Compat.keyMessage(back), keyVersion)), "key JSON differs after round trip");
        JsonNode valueJson = null;
        if (value != null) {
            valueJson = Messages.write(value, valueVersion);
            check(caseName, valueJson.equals(Messages.write(back.value().message(), valueVersion)),
                "value JSON differs after round trip");
        }

        // 3. The bodies are consumed exactly.
        checkExactRead(caseName, key, keyBytes, keyVersion);
        if (value != null) {
            checkExactRead(caseName, value, valueBytes, valueVersion);
        }

        ObjectNode line = Json.obj(
            "case", caseName,
            "key_hex", hex(keyBytes),
            "value_hex", valueBytes == null ? null : hex(valueBytes),
            "key", Json.obj("type", recordType, "data", keyJson),
            "value", value == null ? null : Json.obj("version", (int) valueVersion, "data", valueJson));
        try {
            out.write(Json.MAPPER.writeValueAsString(line));
            out.write('\n');
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        records++;
        if (value == null) {
            tombstones++;
        }
    }

    private static void checkExactRead(String caseName, ApiMessage like, byte[] bytes, short version) {
        ByteBuffer body = ByteBuffer.wrap(bytes, 2, bytes.length - 2).slice();
        ApiMessage fresh = Messages.newInstance(like);
        fresh.read(new ByteBufferAccessor(body), version);
        check(caseName, body.remaining() == 0, body.remaining() + " bytes left after reading " + like.getClass().getSimpleName());
        check(caseName, fresh.equals(like), "direct read of " + like.getClass().getSimpleName() + " differs");
    }

    private static void check(String caseName, boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("case " + caseName + ": " + what);
        }
    }

    static String hex(byte[] bytes) {
        if (bytes == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return sb.toString();
    }

    String summary() {
        return file + ": " + records + " records (" + tombstones + " tombstones), "
            + helperChecks + " cross-checked against Kafka helper factories";
    }

    @Override
    public void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
