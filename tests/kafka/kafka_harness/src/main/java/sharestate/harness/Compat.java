package sharestate.harness;

import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.server.common.ApiMessageAndVersion;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * The few Kafka API calls that differ between 4.0 and 4.1+, done by reflection so one
 * source tree compiles against every release.
 *
 * <ul>
 *   <li>4.0: {@code new CoordinatorRecord(ApiMessageAndVersion key, ApiMessageAndVersion value)};
 *       the key's "version" is the record type, and the serde writes it as the key prefix.
 *       {@code record.key()} returns an {@code ApiMessageAndVersion}.</li>
 *   <li>4.1+: {@code CoordinatorRecord.record(ApiMessage key, ApiMessageAndVersion value)} and
 *       {@code CoordinatorRecord.tombstone(ApiMessage key)}; keys are at version 0 and the prefix
 *       is the key's {@code apiKey()}. {@code record.key()} returns the {@code ApiMessage}.</li>
 * </ul>
 */
final class Compat {
    /** True for Kafka 4.0.x: keys are carried as ApiMessageAndVersion whose version is the record type. */
    static final boolean KEY_VERSION_IS_RECORD_TYPE;
    private static final Constructor<CoordinatorRecord> LEGACY_CTOR;
    private static final Method RECORD;
    private static final Method TOMBSTONE;

    static {
        Constructor<CoordinatorRecord> ctor = null;
        try {
            ctor = CoordinatorRecord.class.getConstructor(ApiMessageAndVersion.class, ApiMessageAndVersion.class);
        } catch (NoSuchMethodException e) {
            // 4.1+
        }
        LEGACY_CTOR = ctor;
        KEY_VERSION_IS_RECORD_TYPE = ctor != null;
        RECORD = KEY_VERSION_IS_RECORD_TYPE ? null
            : method(CoordinatorRecord.class, "record", ApiMessage.class, ApiMessageAndVersion.class);
        TOMBSTONE = KEY_VERSION_IS_RECORD_TYPE ? null
            : method(CoordinatorRecord.class, "tombstone", ApiMessage.class);
    }

    private Compat() { }

    /** The version at which a key of this record type is (de)serialized by this release. */
    static short keyVersion(int recordType) {
        return KEY_VERSION_IS_RECORD_TYPE ? (short) recordType : 0;
    }

    /** A record with a value, built the way this release builds it. */
    static CoordinatorRecord record(int recordType, ApiMessage key, ApiMessage value, short valueVersion) {
        ApiMessageAndVersion v = new ApiMessageAndVersion(value, valueVersion);
        if (KEY_VERSION_IS_RECORD_TYPE) {
            return construct(new ApiMessageAndVersion(key, keyVersion(recordType)), v);
        }
        return (CoordinatorRecord) invoke(RECORD, null, key, v);
    }

    /** A tombstone (null value), built the way this release builds it. */
    static CoordinatorRecord tombstone(int recordType, ApiMessage key) {
        if (KEY_VERSION_IS_RECORD_TYPE) {
            return construct(new ApiMessageAndVersion(key, keyVersion(recordType)), null);
        }
        return (CoordinatorRecord) invoke(TOMBSTONE, null, key);
    }

    /** The key message of a record (unwrapping 4.0's ApiMessageAndVersion). */
    static ApiMessage keyMessage(CoordinatorRecord record) {
        Object key = record.key();
        if (key instanceof ApiMessageAndVersion) {
            return ((ApiMessageAndVersion) key).message();
        }
        return (ApiMessage) key;
    }

    /** The key version a record carries (4.0), or 0 (4.1+, where keys have only version 0). */
    static short keyVersionOf(CoordinatorRecord record) {
        Object key = record.key();
        if (key instanceof ApiMessageAndVersion) {
            return ((ApiMessageAndVersion) key).version();
        }
        return 0;
    }

    /** Finds a public static/instance method or returns null if this release has none. */
    static Method optionalMethod(Class<?> cls, String name, Class<?>... params) {
        try {
            return cls.getMethod(name, params);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    static Method method(Class<?> cls, String name, Class<?>... params) {
        Method m = optionalMethod(cls, name, params);
        if (m == null) {
            throw new IllegalStateException(cls.getName() + "." + name + " not found");
        }
        return m;
    }

    static Object invoke(Method m, Object target, Object... args) {
        try {
            return m.invoke(target, args);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new IllegalStateException(cause);
        }
    }

    private static CoordinatorRecord construct(ApiMessageAndVersion key, ApiMessageAndVersion value) {
        try {
            return LEGACY_CTOR.newInstance(key, value);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }
}
