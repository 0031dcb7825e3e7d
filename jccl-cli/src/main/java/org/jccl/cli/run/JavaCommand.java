package org.jccl.cli.run;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The command line of a rank that runs a Java main class on jccl's own classpath or module path:
 * the running JVM's java binary, the flags jccl needs (native access, the Vector API module) and
 * the classpath of the running JVM plus the jars beside the jccl-cli jar; and the test of whether a
 * command is one of these (its incubator warning is then jccl's doing, see {@link RankOutput}).
 */
final class JavaCommand {

    private JavaCommand() {
    }

    /**
     * The command line that starts a JVM on jccl's own classpath (java binary, flags, -cp) running
     * {@code mainClass}: the java of the running JVM, {@code --enable-native-access=ALL-UNNAMED} (jccl's
     * optional native modules use the FFM API), {@code --add-modules jdk.incubator.vector} (the Vector
     * API reduction kernels), and a classpath of the running JVM's classpath plus the
     * jars next to the jccl-cli jar ({@code jccl-cli/target/lib/*}).
     */
    static List<String> javaCommand(String mainClass) {
        return javaCommand(mainClass, null);
    }

    /**
     * {@link #javaCommand(String)} with {@code extraClasspath} (path-separator list, may be null) added
     * after jccl's own jars.
     */
    static List<String> javaCommand(String mainClass, String extraClasspath) {
        Objects.requireNonNull(mainClass, "mainClass");
        Set<String> cp = new LinkedHashSet<>(ownClasspath());
        if (extraClasspath != null && !extraClasspath.isBlank()) {
            for (String e : extraClasspath.split(File.pathSeparator)) {
                if (!e.isEmpty()) {
                    cp.add(e);
                }
            }
        }
        List<String> cmd = new ArrayList<>();
        cmd.add(javaBinary());
        String modulePath = System.getProperty("jdk.module.path", "");
        if (JavaCommand.class.getModule().isNamed() && !modulePath.isEmpty() && (extraClasspath == null || extraClasspath.isBlank())
                && mainClass.startsWith("org.jccl.cli.")) {
            // jccl runs as modules (java --module-path ... -m org.jccl.cli/...): the ranks run the same way.
            cmd.add("--enable-native-access=org.jccl.core,org.jccl.cuda");
            cmd.add("--module-path");
            cmd.add(modulePath);
            // The modules this JVM resolved from the module path (optional ones added with --add-modules, such
            // as the plot libraries, included), so each rank resolves the same set.
            List<String> resolved = ModuleLayer.boot().modules().stream()
                    .filter(m -> m.getDescriptor() != null && !m.getName().startsWith("java.") && !m.getName().startsWith("jdk."))
                    .map(Module::getName).sorted().toList();
            if (!resolved.isEmpty()) {
                cmd.add("--add-modules");
                cmd.add(String.join(",", resolved));
            }
            cmd.add("-m");
            cmd.add(JavaCommand.class.getModule().getName() + "/" + mainClass);
            return cmd;
        }
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("--add-modules"); // the Vector API reduction kernels (jccl falls back to scalar without it)
        cmd.add("jdk.incubator.vector");
        cmd.add("-cp");
        cmd.add(String.join(File.pathSeparator, cp));
        cmd.add(mainClass);
        return cmd;
    }

    /**
     * Whether {@code command} starts a JVM with the flags jccl itself puts first ({@link #javaCommand},
     * {@code jccl run} with a {@code .jar} TARGET): the java binary, {@code --enable-native-access=ALL-UNNAMED},
     * {@code --add-modules jdk.incubator.vector} (or, when jccl runs as modules, the native access of its
     * modules and the module path). The incubator warning of such a rank is jccl's doing
     * and is dropped; a command the user wrote keeps it.
     */
    static boolean isJcclJavaCommand(List<String> command) {
        if (command.size() > 4 && command.get(0).equals(javaBinary()) && command.get(1).equals("--enable-native-access=org.jccl.core,org.jccl.cuda")
                && command.get(2).equals("--module-path")) {
            return true; // the module form: org.jccl.core requires the incubator module
        }
        return command.size() > 4
                && command.get(0).equals(javaBinary())
                && command.get(1).equals("--enable-native-access=ALL-UNNAMED")
                && command.get(2).equals("--add-modules")
                && command.get(3).equals("jdk.incubator.vector");
    }

    /** The java launcher of the running JVM. */
    static String javaBinary() {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        if (Files.isExecutable(java)) {
            return java.toString();
        }
        // java.home may be unusual (jlink image without bin/java): fall back to how we were started.
        return ProcessHandle.current().info().command().orElse("java");
    }

    /**
     * The running JVM's classpath entries (made absolute) plus, when jccl runs from its jar, the jars its
     * manifest's {@code Class-Path} names ({@code java -jar} reads those from the manifest, so they are not
     * in {@code java.class.path}); for a jar without one, the jars of the {@code lib/} folder beside it.
     * The manifest decides because {@code lib/} may also hold jars of an older build (another version).
     */
    static List<String> ownClasspath() {
        Set<String> cp = new LinkedHashSet<>();
        for (String e : System.getProperty("java.class.path", "").split(File.pathSeparator)) {
            if (!e.isEmpty()) {
                cp.add(Path.of(e).toAbsolutePath().normalize().toString());
            }
        }
        Path self = ownLocation();
        if (self != null && Files.isRegularFile(self)) {
            cp.add(self.toString());
            List<Path> fromManifest = manifestClassPath(self);
            if (!fromManifest.isEmpty()) {
                fromManifest.forEach(p -> cp.add(p.toString()));
                return List.copyOf(cp);
            }
            Path lib = self.resolveSibling("lib");
            if (Files.isDirectory(lib)) {
                try (Stream<Path> jars = Files.list(lib)) {
                    jars.filter(p -> p.getFileName().toString().endsWith(".jar"))
                            .sorted()
                            .forEach(p -> cp.add(p.toAbsolutePath().normalize().toString()));
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot list " + lib + " for the ranks' classpath: " + e.getMessage()
                            + "; rebuild jccl (bin/jccl rebuilds it when it is missing)", e);
                }
            }
        }
        return List.copyOf(cp);
    }

    /**
     * The entries of {@code jar}'s manifest {@code Class-Path} (relative to the jar's folder, made absolute)
     * that exist; empty when it has none or cannot be read.
     */
    static List<Path> manifestClassPath(Path jar) {
        try (java.util.jar.JarFile jf = new java.util.jar.JarFile(jar.toFile())) {
            java.util.jar.Manifest m = jf.getManifest();
            String value = m == null ? null : m.getMainAttributes().getValue(java.util.jar.Attributes.Name.CLASS_PATH);
            if (value == null || value.isBlank()) {
                return List.of();
            }
            List<Path> entries = new ArrayList<>();
            Path dir = jar.toAbsolutePath().normalize().getParent();
            for (String e : value.trim().split("\\s+")) {
                Path p;
                try {
                    p = e.startsWith("file:") ? Path.of(java.net.URI.create(e)) : dir.resolve(java.net.URLDecoder.decode(e,
                            StandardCharsets.UTF_8));
                } catch (IllegalArgumentException bad) { // a malformed URI or path: not an entry
                    continue;
                }
                p = p.normalize();
                if (Files.exists(p)) {
                    entries.add(p);
                }
            }
            return entries;
        } catch (IOException e) {
            return List.of();
        }
    }

    private static Path ownLocation() {
        CodeSource src = JavaCommand.class.getProtectionDomain().getCodeSource();
        if (src == null || src.getLocation() == null) {
            return null;
        }
        try {
            return Path.of(src.getLocation().toURI()).toAbsolutePath().normalize();
        } catch (URISyntaxException | IllegalArgumentException e) {
            return null;
        }
    }
}
