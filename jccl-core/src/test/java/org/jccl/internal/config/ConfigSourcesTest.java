package org.jccl.internal.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.Jccl;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where values come from (code, environment, config file, default), which wins, and the messages
 * for bad values and files. Home directory and system file are temporary paths: nothing here
 * depends on the machine's own ~/.jccl.conf or /etc/jccl.conf.
 */
@Timeout(10)
class ConfigSourcesTest {

    @TempDir
    Path dir;

    private static Map<String, String> env(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    private Path write(String name, String... lines) throws IOException {
        Path p = dir.resolve(name);
        Files.createDirectories(p.getParent());
        Files.write(p, List.of(lines));
        return p;
    }

    private Path home() throws IOException {
        return Files.createDirectories(dir.resolve("home"));
    }

    @Test
    void precedenceIsCodeThenEnvironmentThenFileThenDefault() throws IOException {
        Path file = write("home/.jccl.conf",
                "# site settings",
                "JCCL_SHM_SLOTS=16",
                "JCCL_CHUNK_SIZE = 1M   ",
                "",
                "JCCL_SOCKET_NTHREADS=2");
        Config c = Config.fromEnvironment(env("JCCL_CHUNK_SIZE", "2M", "JCCL_SOCKET_NTHREADS", "4"), home(), null);
        assertEquals(file, c.configFile());
        // file only
        assertEquals(16, Settings.SHM_SLOTS.getInt(c));
        assertEquals(Config.Source.FILE, c.source("JCCL_SHM_SLOTS"));
        assertEquals("file:" + file, c.origin("JCCL_SHM_SLOTS").label());
        assertEquals(2, c.origin("JCCL_SHM_SLOTS").line());
        // environment beats the file
        assertEquals(2L << 20, Settings.CHUNK_SIZE.getLong(c));
        assertEquals("env", c.origin("JCCL_CHUNK_SIZE").label());
        // code beats both
        Config code = c.with("JCCL_SOCKET_NTHREADS", "8");
        assertEquals(8, Settings.SOCKET_NTHREADS.getInt(code));
        assertEquals("code", code.origin("JCCL_SOCKET_NTHREADS").label());
        // default
        assertEquals(Config.Source.DEFAULT, c.source("JCCL_IDLE_SPIN_US"));
        assertEquals("default", c.origin("JCCL_IDLE_SPIN_US").label());
        assertEquals(200, Settings.IDLE_SPIN_US.getInt(c));
    }

    @Test
    void onlyTheFirstFileIsRead() throws IOException {
        Path system = write("etc/jccl.conf", "JCCL_SHM_SLOTS=3", "JCCL_SHM_CHUNK=64K");
        Path user = write("home/.jccl.conf", "JCCL_SHM_SLOTS=5");
        Path named = write("named.conf", "JCCL_SHM_SLOTS=7");

        Config sys = Config.fromEnvironment(env(), dir.resolve("nohome"), system);
        assertEquals(system, sys.configFile());
        assertEquals(3, Settings.SHM_SLOTS.getInt(sys));

        Config usr = Config.fromEnvironment(env(), home(), system);
        assertEquals(user, usr.configFile());
        assertEquals(5, Settings.SHM_SLOTS.getInt(usr));
        assertEquals(512 << 10, Settings.SHM_CHUNK.getLong(usr), "the system file is not read when the user's exists");
        assertEquals(system, ConfigFile.locate(env(), home(), system).shadowed());

        Config nam = Config.fromEnvironment(env("JCCL_CONF_FILE", named.toString()), home(), system);
        assertEquals(named, nam.configFile());
        assertEquals(7, Settings.SHM_SLOTS.getInt(nam));

        assertNull(Config.fromEnvironment(env(), null, null).configFile());
        assertNull(Config.fromEnvironment(env(), dir.resolve("nohome"), dir.resolve("no/etc")).configFile());
    }

    @Test
    void aMissingNamedFileIsAnError() {
        ConfigException e = assertThrows(ConfigException.class,
                () -> Config.fromEnvironment(env("JCCL_CONF_FILE", dir.resolve("nope.conf").toString()), null, null));
        assertEquals("JCCL_CONF_FILE='" + dir.resolve("nope.conf") + "' (from the environment) names a file that does not exist; create it"
                + " (KEY=VALUE lines, # comments) or unset JCCL_CONF_FILE to use ~/.jccl.conf or /etc/jccl.conf", e.getMessage());
    }

    @Test
    void aMalformedLineIsAnErrorNamingTheFileAndLine() throws IOException {
        Path f = write("bad.conf", "JCCL_DEBUG=INFO", "JCCL_SHM_SLOTS 4");
        ConfigException e = assertThrows(ConfigException.class,
                () -> Config.fromEnvironment(env("JCCL_CONF_FILE", f.toString()), null, null));
        assertEquals(f + " line 2: 'JCCL_SHM_SLOTS 4' is not a KEY=VALUE line (e.g. JCCL_DEBUG=INFO; # starts a comment)", e.getMessage());
    }

    @Test
    void fileSyntaxQuotesExportAndComments() {
        List<ConfigFile.Line> lines = ConfigFile.parse("x.conf", List.of("# c", "  export JCCL_DEBUG=\"INFO\"", "JCCL_SHM_DIR='/tmp/a b'",
                "   # indented comment", "NCCL_SOCKET_IFNAME=eth0", "JCCL_ALGO="));
        assertEquals(List.of(new ConfigFile.Line("JCCL_DEBUG", "INFO", 2), new ConfigFile.Line("JCCL_SHM_DIR", "/tmp/a b", 3),
                new ConfigFile.Line("NCCL_SOCKET_IFNAME", "eth0", 5), new ConfigFile.Line("JCCL_ALGO", "", 6)), lines);
    }

    @Test
    void ncclAliasesWorkInTheFileAndTheJcclNameWinsWithinASource() throws IOException {
        Path f = write("a.conf", "JCCL_SOCKET_IFNAME=eth1", "NCCL_SOCKET_IFNAME=eth9", "NCCL_SHM_DISABLE=1");
        Config c = Config.fromEnvironment(env("JCCL_CONF_FILE", f.toString()), null, null);
        assertEquals("eth1", Settings.SOCKET_IFNAME.getString(c));
        assertTrue(Settings.SHM_DISABLE.getBool(c));
        assertEquals("NCCL_SHM_DISABLE", c.origin("JCCL_SHM_DISABLE").variable());
        assertTrue(c.warnings().contains("JCCL_SOCKET_IFNAME=eth1 and NCCL_SOCKET_IFNAME=eth9 are both set in " + f
                + "; jccl uses JCCL_SOCKET_IFNAME"), c.warnings().toString());
        // An alias in the environment still beats the jccl name in the file.
        Config e = Config.fromEnvironment(env("JCCL_CONF_FILE", f.toString(), "NCCL_SOCKET_IFNAME", "ib0"), null, null);
        assertEquals("ib0", Settings.SOCKET_IFNAME.getString(e));
        assertEquals("env", e.origin("JCCL_SOCKET_IFNAME").label());
        Config both = Config.fromEnvironment(env("NCCL_DEBUG", "INFO", "JCCL_DEBUG", "TRACE"));
        assertEquals("TRACE", Settings.DEBUG.getString(both));
        assertTrue(both.warnings().contains("JCCL_DEBUG=TRACE and NCCL_DEBUG=INFO are both set in the environment; jccl uses JCCL_DEBUG"
                + " (NCCL uses NCCL_DEBUG)"), both.warnings().toString());
    }

    @Test
    void aBadValueNamesTheVariableTheValueWhatIsAllowedAndItsSource() throws IOException {
        Config env = Config.fromEnvironment(env("NCCL_SOCKET_NTHREADS", "lots"));
        ConfigException e = assertThrows(ConfigException.class, () -> Settings.SOCKET_NTHREADS.getInt(env));
        assertEquals("JCCL_SOCKET_NTHREADS='lots' is not allowed: expected an integer (" + Settings.SOCKET_NTHREADS.doc()
                + "); set by NCCL_SOCKET_NTHREADS in the environment", e.getMessage());

        Path f = write("r.conf", "", "JCCL_SHM_SLOTS=4096");
        Config file = Config.fromEnvironment(env("JCCL_CONF_FILE", f.toString()), null, null);
        e = assertThrows(ConfigException.class, () -> Settings.SHM_SLOTS.getInt(file));
        assertEquals("JCCL_SHM_SLOTS='4096' is not allowed: expected an integer from 1 to 1024 (" + Settings.SHM_SLOTS.doc()
                + "); set by JCCL_SHM_SLOTS in " + f + " line 2", e.getMessage());

        Config code = Config.defaults().with("JCCL_SHM_CHUNK", "1K");
        e = assertThrows(ConfigException.class, () -> Settings.SHM_CHUNK.getLong(code));
        assertEquals("JCCL_SHM_CHUNK='1K' is not allowed: expected a byte count from 4K to 1G (e.g. 4194304, 4096K or 4M) ("
                + Settings.SHM_CHUNK.doc() + "); set by JCCL_SHM_CHUNK in code (Config.with)", e.getMessage());
    }

    /** JCCL_CHECK: 0 (the guard, default), 1 (and the full exchange), none (no guard); the off-words are refused as ambiguous. */
    @Test
    void checkLevelsAndTheAmbiguousOffWords() {
        assertEquals(Settings.CHECK_GUARD, Settings.checkLevel(Config.defaults()));
        assertEquals(Settings.CHECK_GUARD, Settings.checkLevel(Config.defaults().with("JCCL_CHECK", "0")));
        assertEquals(Settings.CHECK_FULL, Settings.checkLevel(Config.defaults().with("JCCL_CHECK", "1")));
        assertEquals(Settings.CHECK_FULL, Settings.checkLevel(Config.defaults().with("JCCL_CHECK", "yes")));
        assertEquals(Settings.CHECK_NONE, Settings.checkLevel(Config.defaults().with("JCCL_CHECK", "none")));
        for (String word : List.of("off", "false", "no")) {
            Config c = Config.fromEnvironment(env("JCCL_CHECK", word));
            ConfigException e = assertThrows(ConfigException.class, c::validate);
            assertTrue(e.getMessage().startsWith("JCCL_CHECK='" + word + "' is not allowed: the mismatch guard is on by default")
                    && e.getMessage().contains("write 0 (the guard only, the default) or none (no guard")
                    && e.getMessage().endsWith("set by JCCL_CHECK in the environment"), e.getMessage());
        }
        ConfigException e = assertThrows(ConfigException.class, () -> Config.fromEnvironment(env("JCCL_CHECK", "nope")).validate());
        assertTrue(e.getMessage().startsWith("JCCL_CHECK='nope' is not allowed: expected 0 (the mismatch guard), 1 (the guard and the"
                + " full signature exchange) or none (no guard); did you mean none?"), e.getMessage());
    }

    @Test
    void validateReportsEveryBadValueIncludingGrammarsOfTextSettings() {
        Config ok = Config.fromEnvironment(env("JCCL_DEBUG", "info", "JCCL_DEBUG_SUBSYS", "^COLL,P2P", "JCCL_IB_HCA", "mlx5_0:1,mlx5_1",
                "JCCL_SOCKET_IFNAME", "^docker*,lo", "JCCL_ALGO", "ring,rd", "JCCL_DEBUG_FILE", "/tmp/j.%h.%p.%r.log"));
        assertEquals(List.of(), ok.problems());
        assertTrue(ok.validate() == ok);

        Config one = Config.fromEnvironment(env("NCCL_DEBUG_SUBSYS", "INIT,NETT"));
        ConfigException e = assertThrows(ConfigException.class, one::validate);
        assertEquals("JCCL_DEBUG_SUBSYS='INIT,NETT' names NETT, which is not a subsystem; did you mean NET? Allowed: INIT,COLL,P2P,SHM,"
                + "NET,GRAPH,TUNING,ENV,ALLOC,BOOTSTRAP,PROXY or ALL; ^ in front excludes the subsystems listed;"
                + " set by NCCL_DEBUG_SUBSYS in the environment", e.getMessage());

        Config many = Config.fromEnvironment(env("JCCL_DEBUG", "INOF", "JCCL_IB_HCA", "mlx5_0:x", "JCCL_SHM_DISABLE", "maybe",
                "JCCL_REDUCE_VECTOR", "atuo", "JCCL_AUTH_TOKEN", "xyz"));
        List<String> p = many.problems();
        assertEquals(5, p.size(), p.toString());
        assertTrue(p.contains("JCCL_DEBUG='INOF' is not allowed: expected one of NONE, VERSION, WARN, INFO, TRACE; did you mean INFO?;"
                + " set by JCCL_DEBUG in the environment"), p.toString());
        assertTrue(p.stream().anyMatch(m -> m.startsWith("JCCL_IB_HCA='mlx5_0:x' is not allowed: entry 'mlx5_0:x' has port 'x'")),
                p.toString());
        assertTrue(p.contains("JCCL_SHM_DISABLE='maybe' is not allowed: expected 1/0, true/false, yes/no or on/off ("
                + Settings.SHM_DISABLE.doc() + "); set by JCCL_SHM_DISABLE in the environment"), p.toString());
        assertTrue(p.stream().anyMatch(m -> m.startsWith("JCCL_REDUCE_VECTOR='atuo' is not allowed: expected auto, 1 or 0; did you mean"
                + " auto?")), p.toString());
        assertTrue(p.stream().anyMatch(m -> m.startsWith("JCCL_AUTH_TOKEN must be 32 hex digits")), p.toString());
        e = assertThrows(ConfigException.class, many::validate);
        assertTrue(e.getMessage().startsWith("5 settings have values that are not allowed: "), e.getMessage());

        Config file = Config.defaults().with("JCCL_DEBUG_FILE", "/tmp/j.%d.log");
        e = assertThrows(ConfigException.class, file::validate);
        assertEquals("JCCL_DEBUG_FILE='/tmp/j.%d.log' is not allowed: %d is not a placeholder; expected a path where %h is replaced by"
                + " the host name, %p by the pid, %r by the rank and %% by %; set by JCCL_DEBUG_FILE in code (Config.with)", e.getMessage());
    }

    @Test
    void initRejectsABadValueBeforeAnythingStarts() {
        Config bad = Config.defaults().with("NCCL_SHM_DISABLE", "perhaps");
        ConfigException e = assertThrows(ConfigException.class, () -> Jccl.initLocal(2, bad));
        assertEquals("JCCL_SHM_DISABLE='perhaps' is not allowed: expected 1/0, true/false, yes/no or on/off (" + Settings.SHM_DISABLE.doc()
                + "); set by NCCL_SHM_DISABLE in code (Config.with)", e.getMessage());
    }

    @Test
    void unknownJcclVariablesWarnWithDidYouMean() {
        Config c = Config.fromEnvironment(env("JCCL_SOCKET_IFNAM", "eth0", "JCCL_DEBUG_SUBSYSTEM", "ALL", "JCCL_NTHREADS", "4",
                "JCCL_WHATEVER_THIS_IS", "1", "jccl_debug", "INFO", "JCCL_JVM_DIR", "/opt/jvm"));
        List<String> w = c.warnings();
        assertTrue(w.contains("JCCL_SOCKET_IFNAM (environment) is not a jccl setting and has no effect; did you mean JCCL_SOCKET_IFNAME?"),
                w.toString());
        assertTrue(w.contains("JCCL_DEBUG_SUBSYSTEM (environment) is not a jccl setting and has no effect; did you mean JCCL_DEBUG_SUBSYS?"),
                w.toString());
        assertTrue(w.contains("JCCL_NTHREADS (environment) is not a jccl setting and has no effect; did you mean JCCL_SOCKET_NTHREADS?"),
                w.toString());
        assertTrue(w.contains("JCCL_WHATEVER_THIS_IS (environment) is not a jccl setting and has no effect; `jccl env` lists every"
                + " setting"), w.toString());
        assertTrue(w.contains("jccl_debug (environment) is not a jccl setting and has no effect; did you mean JCCL_DEBUG?"), w.toString());
        assertTrue(w.stream().noneMatch(x -> x.startsWith("JCCL_JVM_DIR")), "bin/jdk25.sh's variable is not a typo: " + w);
        assertEquals(5, w.size(), w.toString());
    }

    @Test
    void ncclVariablesThatDoNotExistOrThatJcclIgnoresWarn() {
        Config c = Config.fromEnvironment(env("NCCL_IB_MTU", "4096", "NCCL_RX_RING_SIZE", "8192", "NCCL_IB_DISABLE_ECN", "1",
                "NCCL_NTHREADS", "512", "NCCL_BUFFSIZE", "8388608", "NCCL_SOCKET_IFNAM", "eth0", "NCCL_SOCKET_IFNAME", "eth0",
                "NCCL_SOME_FUTURE_KNOB", "1", "PATH", "/bin"));
        List<String> w = c.warnings();
        assertTrue(w.contains("NCCL_IB_MTU (environment) has no effect anywhere: NCCL has no such variable (it circulates in blog posts"
                + " and old scripts) and jccl has none either; the IB MTU is the port's active MTU, set by the subnet manager or the NIC"
                + " (ibv_devinfo -v shows active_mtu)"), w.toString());
        assertTrue(w.stream().anyMatch(x -> x.startsWith("NCCL_RX_RING_SIZE (environment) has no effect anywhere")), w.toString());
        assertTrue(w.stream().anyMatch(x -> x.startsWith("NCCL_IB_DISABLE_ECN (environment) has no effect anywhere")), w.toString());
        assertTrue(w.contains("NCCL_NTHREADS (environment) is an NCCL variable that jccl ignores (it still applies to NCCL itself);"
                + " jccl's GPU kernels size their blocks by themselves (JCCL_CUDA_NBLOCKS sets the block count)"), w.toString());
        assertTrue(w.stream().anyMatch(x -> x.startsWith("NCCL_BUFFSIZE (environment) is an NCCL variable that jccl ignores")),
                w.toString());
        assertTrue(w.contains("NCCL_SOCKET_IFNAM (environment) is not an NCCL variable that jccl knows and has no effect on jccl; did"
                + " you mean NCCL_SOCKET_IFNAME?"), w.toString());
        // NCCL_SOCKET_IFNAME is honoured (alias); an unknown NCCL name far from any known one and PATH are left alone.
        assertEquals(6, w.size(), w.toString());
    }

    @Test
    void fileLinesThatAreNotSettingsWarnWithTheirLine() throws IOException {
        Path f = write("w.conf", "JCCL_SHM_SLOT=4", "FOO=1", "NCCL_IB_MTU=4096", "JCCL_CONF_FILE=/x", "JCCL_DEBUG=INFO", "JCCL_DEBUG=WARN");
        Config c = Config.fromEnvironment(env("JCCL_CONF_FILE", f.toString()), null, null);
        List<String> w = c.warnings();
        assertTrue(w.contains("JCCL_SHM_SLOT (" + f + " line 1) is not a jccl setting and has no effect; did you mean JCCL_SHM_SLOTS?"),
                w.toString());
        assertTrue(w.contains("FOO (" + f + " line 2) is neither a jccl nor an NCCL variable: ignored (jccl reads only settings from its"
                + " config file and sets no environment variables)"), w.toString());
        assertTrue(w.stream().anyMatch(x -> x.startsWith("NCCL_IB_MTU (" + f + " line 3) has no effect anywhere")), w.toString());
        assertTrue(w.contains(f + " line 4: JCCL_CONF_FILE has no effect inside a config file (it names the file to read); set it in the"
                + " environment"), w.toString());
        assertTrue(w.contains(f + " line 6 sets JCCL_DEBUG again (line 5 set 'INFO'); the later line wins"), w.toString());
        assertEquals("WARN", Settings.DEBUG.getString(c));
    }

    @Test
    void withRejectsUnknownNamesWithDidYouMean() {
        ConfigException e = assertThrows(ConfigException.class, () -> Config.defaults().with("JCCL_SHM_SLOT", "4"));
        assertEquals("unknown setting 'JCCL_SHM_SLOT'; did you mean JCCL_SHM_SLOTS? (`jccl env` lists every setting)", e.getMessage());
        e = assertThrows(ConfigException.class, () -> Config.defaults().with("NCCL_SOCKET_IFNAM", "x"));
        assertTrue(e.getMessage().contains("did you mean NCCL_SOCKET_IFNAME?"), e.getMessage());
    }

    @Test
    void everySettingIsDocumentedWithAnAllowedRange() {
        for (Setting s : Setting.all().values()) {
            assertTrue(s.name().startsWith("JCCL_"), s.name());
            assertTrue(s.doc() != null && s.doc().length() > 10, s.name());
            assertTrue(s.allowed() != null && !s.allowed().isBlank(), s.name());
            assertTrue(s.ncclAlias() == null || s.ncclAlias().equals("NCCL_" + s.name().substring(5))
                    || s.name().equals("JCCL_CUDA_P2P_DISABLE"), "alias " + s.ncclAlias() + " of " + s.name());
            if (s.defaultValue() != null) {
                Config c = Config.defaults().with(s.name(), s.defaultValue());
                assertNull(s.problem(c), "the default of " + s.name() + " must be allowed");
            }
        }
        assertTrue(Setting.all().containsKey("JCCL_CONF_FILE"));
        assertEquals("NCCL_IB_HCA", Setting.byName("JCCL_IB_HCA").ncclAlias());
    }

    @Test
    void didYouMeanIsConservative() {
        List<String> names = List.of("JCCL_DEBUG", "JCCL_DEBUG_SUBSYS", "JCCL_SHM_DIR");
        assertEquals("JCCL_DEBUG", DidYouMean.closest("JCCL_DEBGU", names, "JCCL_"), "a swap of neighbours is one edit");
        assertNull(DidYouMean.closest("JCCL_XYZ", names, "JCCL_"));
        assertNull(DidYouMean.closest("JCCL_SHM", names, "JCCL_"), "three letters differ from SHM_DIR: too far for a short name");
        assertEquals(1, DidYouMean.distance("INTI", "INIT"));
        assertEquals(3, DidYouMean.distance("kitten", "sitting"));
    }
}
