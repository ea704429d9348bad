package sharestate.harness;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.common.protocol.ApiMessage;

import java.lang.reflect.Method;

/**
 * Builds and renders Kafka's generated message classes through their generated
 * {@code <Message>JsonConverter} classes: {@code read(JsonNode, short)} and
 * {@code write(Message, short)}. Building messages from JSON keeps the case definitions
 * independent of the setters each release has; the generated reader also rejects
 * out-of-range values (e.g. a uint16 above 65535) and missing mandatory fields.
 */
final class Messages {
    private Messages() { }

    static ApiMessage read(String messageClassName, JsonNode json, short version) {
        Method read = Compat.method(load(messageClassName + "JsonConverter"), "read", JsonNode.class, short.class);
        return (ApiMessage) Compat.invoke(read, null, json, version);
    }

    /** Kafka's own JSON rendering of a message at a version. */
    static JsonNode write(ApiMessage message, short version) {
        Class<?> messageClass = message.getClass();
        Method write = Compat.method(load(messageClass.getName() + "JsonConverter"), "write", messageClass, short.class);
        return (JsonNode) Compat.invoke(write, null, message, version);
    }

    /** A fresh, empty instance of the same generated message class. */
    static ApiMessage newInstance(ApiMessage like) {
        try {
            return like.getClass().getConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Class<?> load(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException("class not in this Kafka release: " + name, e);
        }
    }
}
