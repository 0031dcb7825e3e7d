package org.jccl.cli.run;

import static org.jccl.cli.CliRun.jccl;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.jccl.cli.CliRun.Result;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code jccl run} through the real command line (picocli parsing, target kinds, exit codes). */
class RunCommandTest {

    @Test
    @Timeout(30)
    void aCommandTargetRunsAsIs() {
        Result r = jccl("run", "-np", "2", "--", "sh", "-c", "echo $JCCL_RANK of $JCCL_WORLD_SIZE");
        assertEquals(0, r.code(), r.err());
        assertEquals(List.of("[0] 0 of 2", "[1] 1 of 2"), r.out().lines().sorted().toList());
    }

    @Test
    @Timeout(60)
    void aJavaClassTargetRunsOnJcclsClasspathAndGetsItsArguments() {
        // No "--": everything after the target belongs to the program, even "-1" which looks like an option.
        Result r = jccl("run", "-np", "2", RankProbe.class.getName(), "-1", "0", "0");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("[0] JCCL_RANK=0"), r.out());
        assertTrue(r.out().contains("[1] JCCL_WORLD_SIZE=2"), r.out());
    }

    @Test
    @Timeout(60)
    void aJarTargetRunsWithJavaJar(@TempDir Path dir) throws IOException {
        Path jar = dir.resolve("probe.jar");
        Manifest mf = new Manifest();
        mf.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        mf.getMainAttributes().put(Attributes.Name.MAIN_CLASS, RankProbe.class.getName());
        String entry = RankProbe.class.getName().replace('.', '/') + ".class";
        try (OutputStream os = Files.newOutputStream(jar);
                JarOutputStream jos = new JarOutputStream(os, mf);
                InputStream cls = RankProbe.class.getClassLoader().getResourceAsStream(entry)) {
            jos.putNextEntry(new JarEntry(entry));
            cls.transferTo(jos);
            jos.closeEntry();
        }
        Result r = jccl("run", "-np", "2", jar.toString(), "1", "4", "0");
        assertEquals(4, r.code(), r.err());
        assertTrue(r.out().contains("[1] JCCL_RANK=1"), r.out());
        assertTrue(r.err().contains("jccl run: rank 1 exited with code 4"), r.err());
    }

    @Test
    @Timeout(30)
    void theTimeoutOptionReturns124() {
        Result r = jccl("run", "--timeout", "1", "-np", "2", "sleep", "60");
        assertEquals(124, r.code(), r.err());
        assertTrue(r.err().contains("ranks still running: [0, 1]"), r.err());
    }

    @Test
    @Timeout(30)
    void usageErrorsExitWith2AndSayWhy() {
        Result zero = jccl("run", "-np", "0", "sh");
        assertEquals(2, zero.code());
        assertTrue(zero.err().contains("-np must be at least 1"), zero.err());

        Result noTarget = jccl("run", "-np", "2");
        assertEquals(2, noTarget.code());
        assertTrue(noTarget.err().contains("TARGET"), noTarget.err());

        Result noNp = jccl("run", "sh");
        assertEquals(2, noNp.code());
        assertTrue(noNp.err().contains("-np"), noNp.err());

        Result negativeTimeout = jccl("run", "-np", "1", "--timeout", "-5", "sh");
        assertEquals(2, negativeTimeout.code());
        assertTrue(negativeTimeout.err().contains("--timeout must be 0"), negativeTimeout.err());

        Result cpForCommand = jccl("run", "-np", "1", "--cp", "x.jar", "sh");
        assertEquals(2, cpForCommand.code());
        assertTrue(cpForCommand.err().contains("--cp applies to a Java class TARGET"), cpForCommand.err());

        Result missingJar = jccl("run", "-np", "1", "no-such-file.jar");
        assertEquals(2, missingJar.code());
        assertTrue(missingJar.err().contains("jar file 'no-such-file.jar' not found"), missingJar.err());
    }

    @Test
    @Timeout(10)
    void targetsAreClassified() {
        assertEquals(RunCommand.Kind.JAR, RunCommand.kindOf("build/app.jar"));
        assertEquals(RunCommand.Kind.JAVA_CLASS, RunCommand.kindOf("com.example.Main"));
        assertEquals(RunCommand.Kind.JAVA_CLASS, RunCommand.kindOf("a.b$Inner"));
        assertEquals(RunCommand.Kind.COMMAND, RunCommand.kindOf("sh"));
        assertEquals(RunCommand.Kind.COMMAND, RunCommand.kindOf("./train.py"));
        // Looks like a class name, but it is a file here (the module folder is the working directory).
        assertTrue(Files.exists(Path.of("pom.xml")));
        assertEquals(RunCommand.Kind.COMMAND, RunCommand.kindOf("pom.xml"));
    }
}
