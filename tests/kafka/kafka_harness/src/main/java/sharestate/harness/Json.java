package sharestate.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.Uuid;

import java.util.Base64;
import java.util.Collection;

/** Small helpers to write case inputs as JSON (the input to Kafka's JsonConverter.read). */
final class Json {
    static final JsonNodeFactory F = JsonNodeFactory.instance;
    static final ObjectMapper MAPPER = new ObjectMapper();

    private Json() { }

    /** {@code obj("a", 1, "b", "x")}; values: Integer, Long, Short, Byte, String, Uuid, byte[], JsonNode, Collection, int[], null. */
    static ObjectNode obj(Object... keysAndValues) {
        if (keysAndValues.length % 2 != 0) {
            throw new IllegalArgumentException("odd number of arguments");
        }
        ObjectNode o = F.objectNode();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            o.set((String) keysAndValues[i], node(keysAndValues[i + 1]));
        }
        return o;
    }

    static ArrayNode arr(Object... values) {
        ArrayNode a = F.arrayNode();
        for (Object v : values) {
            a.add(node(v));
        }
        return a;
    }

    static JsonNode node(Object v) {
        if (v == null) {
            return F.nullNode();
        } else if (v instanceof JsonNode) {
            return (JsonNode) v;
        } else if (v instanceof Integer) {
            return F.numberNode((Integer) v);
        } else if (v instanceof Long) {
            return F.numberNode((Long) v);
        } else if (v instanceof Short) {
            return F.numberNode((Short) v);
        } else if (v instanceof Byte) {
            return F.numberNode((short) (byte) (Byte) v);
        } else if (v instanceof String) {
            return F.textNode((String) v);
        } else if (v instanceof Uuid) {
            return F.textNode(v.toString());
        } else if (v instanceof byte[]) {
            // Kafka's JsonConverter reads "bytes" fields from base64 text.
            return F.textNode(Base64.getEncoder().encodeToString((byte[]) v));
        } else if (v instanceof int[]) {
            ArrayNode a = F.arrayNode();
            for (int x : (int[]) v) {
                a.add(x);
            }
            return a;
        } else if (v instanceof Collection) {
            ArrayNode a = F.arrayNode();
            for (Object x : (Collection<?>) v) {
                a.add(node(x));
            }
            return a;
        }
        throw new IllegalArgumentException("unsupported JSON value type " + v.getClass());
    }
}
