package sharestate.harness;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** Counters collected while generating a corpus (sorted, so the JSON is deterministic). */
final class CorpusStats {
    private final Map<String, Long> counts = new TreeMap<>();
    private final Map<String, Long> maxima = new TreeMap<>();
    private final Map<String, List<String>> examples = new TreeMap<>();

    void count(String key) {
        counts.merge(key, 1L, Long::sum);
    }

    void max(String key, long value) {
        maxima.merge(key, value, Math::max);
    }

    void example(String key, String value) {
        List<String> l = examples.computeIfAbsent(key, k -> new ArrayList<>());
        if (l.size() < 20) {
            l.add(value);
        }
    }

    long get(String key) {
        return counts.getOrDefault(key, 0L);
    }

    ObjectNode json() {
        ObjectNode o = Json.F.objectNode();
        ObjectNode c = o.putObject("counts");
        counts.forEach(c::put);
        ObjectNode m = o.putObject("maxima");
        maxima.forEach(m::put);
        ObjectNode e = o.putObject("examples");
        examples.forEach((k, v) -> {
            ArrayNode a = e.putArray(k);
            v.forEach(a::add);
        });
        return o;
    }
}
