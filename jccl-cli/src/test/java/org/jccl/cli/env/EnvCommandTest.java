package org.jccl.cli.env;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.cli.JcclCli;
import org.jccl.cli.perf.MiniJson;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code jccl env} on synthetic environments, home directories and system files. */
@Timeout(30)
class EnvCommandTest {

    @TempDir
    Path dir;

    private record Result(int code, String out) {
    }

    private Result env(Map<String, String> env, Path home, Path system, String... args) {
        StringWriter out = new StringWriter();
        CommandLine cl = new CommandLine(new EnvCommand(env, home, system));
        cl.setOut(new PrintWriter(out, true));
        int code = cl.execute(args);
        return new Result(code, out.toString());
    }

    private static Map<String, String> vars(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    /** The table row of {@code name}, columns split on runs of blanks. */
    private static List<String> row(String text, String name) {
        for (String line : text.lines().toList()) {
            if (line.startsWith(name + " ")) {
                return List.of(line.trim().split("\\s{2,}"));
            }
        }
        throw new AssertionError("no row for " + name + " in:\n" + text);
    }

    @Test
    void everySettingWithValueAndSource() throws IOException {
        Path home = Files.createDirectories(dir.resolve("home"));
        Path conf = home.resolve(".jccl.conf");
        Files.write(conf, List.of("# mine", "JCCL_SHM_SLOTS=16", "NCCL_DEBUG=INFO"));
        Path system = Files.writeString(dir.resolve("jccl.conf"), "JCCL_SHM_DIR=/mnt/shm\n");
        Result r = env(vars("NCCL_SOCKET_IFNAME", "eth0", "JCCL_CHUNK_SIZE", "1M", "JCCL_AUTH_TOKEN", "00112233445566778899aabbccddeeff"),
                home, system);
        assertEquals(0, r.code(), r.out());
        assertTrue(r.out().contains("# config file: " + conf + " (found as ~/.jccl.conf); " + system + " exists but is not read: only one"
                + " file is"), r.out());
        assertEquals(List.of("JCCL_SOCKET_IFNAME", "eth0", "env (NCCL_SOCKET_IFNAME)"), row(r.out(), "JCCL_SOCKET_IFNAME"));
        assertEquals(List.of("JCCL_CHUNK_SIZE", "1M", "env"), row(r.out(), "JCCL_CHUNK_SIZE"));
        assertEquals(List.of("JCCL_SHM_SLOTS", "16", "file:" + conf + " line 2"), row(r.out(), "JCCL_SHM_SLOTS"));
        assertEquals(List.of("JCCL_DEBUG", "INFO", "file:" + conf + " line 3 (NCCL_DEBUG)"), row(r.out(), "JCCL_DEBUG"));
        assertEquals(List.of("JCCL_SHM_DIR", "/dev/shm", "default"), row(r.out(), "JCCL_SHM_DIR"), "the shadowed file is not read");
        assertEquals(List.of("JCCL_COMM_ID", "-", "default"), row(r.out(), "JCCL_COMM_ID"));
        assertEquals(List.of("JCCL_AUTH_TOKEN", "****", "env"), row(r.out(), "JCCL_AUTH_TOKEN"), "the secret is never printed");
        assertTrue(!r.out().contains("00112233"), r.out());
        for (String name : List.of("JCCL_CONF_FILE", "JCCL_IB_HCA", "JCCL_DEBUG_SUBSYS", "JCCL_DEBUG_FILE", "JCCL_REDUCE_VECTOR")) {
            row(r.out(), name);
        }
        assertTrue(!r.out().contains("warnings:") && !r.out().contains("errors:"), r.out());
    }

    @Test
    void warningsAndErrorsAreListedAndErrorsSetTheExitCode() {
        Result r = env(vars("JCCL_SOCKET_IFNAM", "eth0", "NCCL_IB_MTU", "4096", "NCCL_BUFFSIZE", "1", "JCCL_SHM_SLOTS", "many",
                "JCCL_DEBUG_SUBSYS", "INIT,TUNNING"), null, null);
        assertEquals(1, r.code(), r.out());
        assertTrue(r.out().contains("\nwarnings:\n  WARN JCCL_SOCKET_IFNAM (environment) is not a jccl setting and has no effect; did you"
                + " mean JCCL_SOCKET_IFNAME?\n"), r.out());
        assertTrue(r.out().contains("  WARN NCCL_IB_MTU (environment) has no effect anywhere: NCCL has no such variable"), r.out());
        assertTrue(r.out().contains("  WARN NCCL_BUFFSIZE (environment) is an NCCL variable that jccl ignores"), r.out());
        assertTrue(r.out().contains("\nerrors:\n"), r.out());
        assertTrue(r.out().contains("  ERROR JCCL_SHM_SLOTS='many' is not allowed: expected an integer ("), r.out());
        assertTrue(r.out().contains("  ERROR JCCL_DEBUG_SUBSYS='INIT,TUNNING' names TUNNING, which is not a subsystem; did you mean"
                + " TUNING?"), r.out());
        assertEquals(List.of("JCCL_SHM_SLOTS", "many", "env", "NOT ALLOWED"), row(r.out(), "JCCL_SHM_SLOTS"));
    }

    @Test
    void aBrokenConfigFileIsAnErrorAndTheEnvironmentIsStillShown() throws IOException {
        Path f = Files.write(dir.resolve("bad.conf"), List.of("JCCL_SHM_SLOTS 4"));
        Result r = env(vars("JCCL_CONF_FILE", f.toString(), "JCCL_SHM_DIR", "/tmp"), null, null);
        assertEquals(1, r.code(), r.out());
        assertTrue(r.out().contains("  ERROR " + f + " line 1: 'JCCL_SHM_SLOTS 4' is not a KEY=VALUE line"), r.out());
        assertEquals(List.of("JCCL_SHM_DIR", "/tmp", "env"), row(r.out(), "JCCL_SHM_DIR"));
        assertTrue(r.out().contains("# config file: none"), r.out());
    }

    @Test
    void theJobIdentityIsShownOrItsProblem() {
        Result ok = env(vars("JCCL_RANK", "1", "JCCL_WORLD_SIZE", "4", "JCCL_COMM_ID", "127.0.0.1:29500", "JCCL_AUTH_TOKEN",
                "00112233445566778899aabbccddeeff"), null, null);
        assertTrue(ok.out().contains("# job: JCCL: rank 1 of 4, root JCCL_COMM_ID=127.0.0.1:29500, secret from JCCL_AUTH_TOKEN\n"), ok.out());
        Result half = env(vars("SLURM_PROCID", "0"), null, null);
        assertEquals(0, half.code(), "an incomplete launcher convention is a warning here, not an error");
        assertTrue(half.out().contains("  WARN a launcher's variables are present but do not describe a job"), half.out());
    }

    @Test
    @SuppressWarnings("unchecked")
    void jsonHasEverySettingWithItsSource() throws IOException {
        Path conf = Files.write(dir.resolve("c.conf"), List.of("JCCL_SHM_SLOTS=16"));
        Result r = env(vars("JCCL_CONF_FILE", conf.toString(), "NCCL_SOCKET_IFNAME", "eth0", "JCCL_NTHREADS", "4"), null, null, "--json");
        assertEquals(0, r.code(), r.out());
        Map<String, Object> root = (Map<String, Object>) MiniJson.parse(r.out());
        assertEquals(List.of("code", "env", "file", "default"), root.get("precedence"));
        assertEquals(conf.toString(), ((Map<String, Object>) root.get("config_file")).get("path"));
        assertNull(root.get("job"));
        List<Map<String, Object>> settings = (List<Map<String, Object>>) root.get("settings");
        Map<String, Map<String, Object>> byName = new HashMap<>();
        for (Map<String, Object> s : settings) {
            byName.put((String) s.get("name"), s);
        }
        Map<String, Object> ifname = byName.get("JCCL_SOCKET_IFNAME");
        assertEquals("eth0", ifname.get("value"));
        assertEquals("env", ifname.get("source"));
        assertEquals("NCCL_SOCKET_IFNAME", ifname.get("variable"));
        assertEquals("NCCL_SOCKET_IFNAME", ifname.get("nccl_alias"));
        Map<String, Object> slots = byName.get("JCCL_SHM_SLOTS");
        assertEquals("16", slots.get("value"));
        assertEquals("file", slots.get("source"));
        assertEquals(conf.toString(), slots.get("file"));
        assertEquals(1.0, slots.get("line"));
        assertEquals("an integer from 1 to 1024", slots.get("allowed"));
        Map<String, Object> spin = byName.get("JCCL_IDLE_SPIN_US");
        assertEquals("200", spin.get("value"));
        assertEquals("default", spin.get("source"));
        assertNull(spin.get("error"));
        assertEquals(List.of("JCCL_NTHREADS (environment) is not a jccl setting and has no effect; did you mean JCCL_SOCKET_NTHREADS?"),
                root.get("warnings"));
        assertEquals(List.of(), root.get("errors"));
    }

    @Test
    void isASubcommandOfJccl() {
        PrintStream old = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
            assertEquals(0, JcclCli.execute("env", "--help"));
        } finally {
            System.setOut(old);
        }
        String help = buf.toString(StandardCharsets.UTF_8);
        assertTrue(help.contains("Usage: jccl env [-hV] [--json]"), help);
        assertTrue(help.contains("default, env (JCCL_X or its NCCL alias NCCL_X), file:<path>"), help);
    }
}
