package org.jccl.internal.topo;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Expands a synthetic sysfs/procfs tree from its manifest under {@code src/test/resources/topo/NAME.tree}
 * into a directory: real files and real symbolic links, so that the readers follow links as on a
 * host. (A manifest rather than a committed tree: Maven's resource copy would follow the links and
 * flatten them.) Lines: {@code f PATH CONTENT} (a file; {@code \n} in CONTENT is a newline; a final
 * newline is added), {@code l LINK -> TARGET}, {@code i OTHER.tree}, {@code x PATH} (remove), {@code #} comments.
 */
final class FixtureTree {
    private FixtureTree() {
    }

    /** Expands fixture {@code name} (without .tree) under {@code dir} and returns {@code dir}. */
    static Path expand(String name, Path dir) {
        try {
            apply(name, dir);
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void apply(String name, Path dir) throws IOException {
        String text;
        try (InputStream in = FixtureTree.class.getResourceAsStream("/topo/" + name + ".tree")) {
            if (in == null) {
                throw new IOException("no fixture topo/" + name + ".tree");
            }
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        for (String line : text.split("\n")) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            char op = line.charAt(0);
            String rest = line.substring(2);
            switch (op) {
                case 'f' -> {
                    int sp = rest.indexOf(' ');
                    String path = sp < 0 ? rest : rest.substring(0, sp);
                    String content = sp < 0 ? "" : rest.substring(sp + 1).replace("\\n", "\n");
                    write(dir.resolve(path), content.endsWith("\n") ? content : content + "\n");
                }
                case 'l' -> {
                    String[] parts = rest.split(" -> ", 2);
                    Path link = dir.resolve(parts[0].trim());
                    Files.createDirectories(link.getParent());
                    Files.deleteIfExists(link);
                    Files.createSymbolicLink(link, Path.of(parts[1].trim()));
                }
                case 'i' -> apply(rest.trim().replace(".tree", ""), dir);
                case 'x' -> delete(dir.resolve(rest.trim()));
                default -> throw new IOException("fixture " + name + ": bad line '" + line + "'");
            }
        }
    }

    /** Writes {@code content} to {@code file}, creating its directories. */
    static void write(Path file, String content) {
        try {
            Files.createDirectories(file.getParent());
            Files.writeString(file, content);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void delete(Path p) throws IOException {
        if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        if (Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            try (Stream<Path> s = Files.walk(p)) {
                for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(q);
                }
            }
        } else {
            Files.delete(p);
        }
    }
}
