package sharestate.harness;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;

/**
 * Reads the message schema files that Kafka bundles in its jars
 * ({@code common/message/<Name>.json}), so that the golden cases can adapt to the
 * fields each release actually has. Only top-level fields are looked up.
 */
final class Schemas {
    private static final ObjectMapper MAPPER = new ObjectMapper()
        .configure(JsonParser.Feature.ALLOW_COMMENTS, true);
    private static final Map<String, JsonNode> CACHE = new HashMap<>();

    private Schemas() { }

    /** True if the Kafka jars on the classpath bundle a schema of this name. */
    static boolean exists(String messageName) {
        return load(messageName) != null;
    }

    /** True if the message schema has a top-level field of this name (schema spelling, e.g. "CreateTimestamp"). */
    static boolean hasField(String messageName, String fieldName) {
        return field(messageName, fieldName) != null;
    }

    /** The schema type of a top-level field, e.g. "int32", "uint16", "[]StateBatch". */
    static String fieldType(String messageName, String fieldName) {
        JsonNode f = field(messageName, fieldName);
        if (f == null) {
            throw new IllegalStateException(messageName + " has no field " + fieldName);
        }
        return f.get("type").asText();
    }

    private static JsonNode field(String messageName, String fieldName) {
        for (JsonNode f : require(messageName).get("fields")) {
            if (f.get("name").asText().equals(fieldName)) {
                return f;
            }
        }
        return null;
    }

    private static JsonNode require(String messageName) {
        JsonNode schema = load(messageName);
        if (schema == null) {
            throw new IllegalStateException("no bundled schema common/message/" + messageName + ".json");
        }
        return schema;
    }

    private static synchronized JsonNode load(String messageName) {
        if (CACHE.containsKey(messageName)) {
            return CACHE.get(messageName);
        }
        JsonNode schema = null;
        String resource = "common/message/" + messageName + ".json";
        try (InputStream in = Schemas.class.getClassLoader().getResourceAsStream(resource)) {
            if (in != null) {
                schema = MAPPER.readTree(in);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + resource, e);
        }
        CACHE.put(messageName, schema);
        return schema;
    }
}
