package org.jccl.internal.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * "Nothing in jccl deserializes Java objects from the network": no main source file of any module
 * uses the JDK's object deserialization (ObjectInputStream, readObject/readUnshared, XMLDecoder);
 * every wire is a hand-written binary codec (docs/WIRE.md "Wire format"). A guard that fails
 * the build the day someone adds one.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NoJavaDeserializationTest {

    private static final Pattern FORBIDDEN = Pattern.compile("\\bObjectInputStream\\b|\\.readObject\\(|\\.readUnshared\\(|\\bXMLDecoder\\b");

    @Test
    void noMainSourceOfAnyModuleDeserializesJavaObjects() throws IOException {
        Path root = Path.of("").toAbsolutePath().getParent(); // the build runs in jccl-core
        List<Path> modules = new ArrayList<>();
        try (Stream<Path> s = Files.list(root)) {
            s.filter(p -> Files.isDirectory(p.resolve("src/main/java"))).forEach(modules::add);
        }
        assertTrue(modules.stream().anyMatch(p -> p.getFileName().toString().equals("jccl-core")), "modules found: " + modules);
        List<String> hits = new ArrayList<>();
        int files = 0;
        for (Path m : modules) {
            try (Stream<Path> s = Files.walk(m.resolve("src/main/java"))) {
                for (Path f : s.filter(p -> p.toString().endsWith(".java")).toList()) {
                    files++;
                    List<String> lines = Files.readAllLines(f);
                    for (int i = 0; i < lines.size(); i++) {
                        if (FORBIDDEN.matcher(lines.get(i)).find()) {
                            hits.add(root.relativize(f) + ":" + (i + 1) + ": " + lines.get(i).strip());
                        }
                    }
                }
            }
        }
        assertTrue(files > 100, "only " + files + " main source files under " + root);
        assertEquals(List.of(), hits, "Java object deserialization in main code");
    }
}
