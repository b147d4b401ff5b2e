package org.rmqc.interop;

import java.util.LinkedHashMap;
import java.util.Map;

/** One JSON object per line on stdout, flushed at once (the tests read it while we run). */
final class Json {
    private final Map<String, Object> fields = new LinkedHashMap<>();

    static Json of(String event) {
        Json json = new Json();
        json.fields.put("event", event);
        return json;
    }

    Json put(String key, Object value) {
        fields.put(key, value);
        return this;
    }

    void print() {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Object> field : fields.entrySet()) {
            if (out.length() > 1) {
                out.append(',');
            }
            quote(out, field.getKey());
            out.append(':');
            Object value = field.getValue();
            if (value == null) {
                out.append("null");
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else {
                quote(out, value.toString());
            }
        }
        out.append('}');
        synchronized (System.out) {
            System.out.println(out);
            System.out.flush();
        }
    }

    private static void quote(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }

    /** `key=value` program arguments. */
    static Map<String, String> args(String[] args) {
        Map<String, String> parsed = new LinkedHashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value, got " + arg);
            }
            parsed.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        return parsed;
    }

    private Json() {
    }
}
