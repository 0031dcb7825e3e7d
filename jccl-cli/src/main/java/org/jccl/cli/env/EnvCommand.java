package org.jccl.cli.env;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Callable;
import org.jccl.internal.config.ConfigFile;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code jccl env [--json]}: every setting with its effective value and source, the config file,
 * the job identity and the warnings about variables that have no effect. Exit code 0, or 1 when a
 * value is not allowed or the config file is broken (the same errors {@code Jccl.init} would raise).
 */
@Command(name = "env", mixinStandardHelpOptions = true, sortOptions = false,
        header = "Print every jccl setting with its effective value and where it came from.",
        description = {
            "Prints every setting of jccl's registry with its effective value and its source: default, env (JCCL_X or its NCCL"
                    + " alias NCCL_X), file:<path> (the config file) or code. A value comes from the first of: code (Config.with),"
                    + " the environment, the config file, the default; the config file is the first of $JCCL_CONF_FILE,"
                    + " ~/.jccl.conf and /etc/jccl.conf that exists (KEY=VALUE lines, # comments).",
            "Then the warnings: unknown JCCL_* variables (with \"did you mean\"), NCCL variables that do not exist"
                    + " (NCCL_IB_MTU, NCCL_RX_RING_SIZE, NCCL_IB_DISABLE_ECN) or that jccl ignores (NCCL_NTHREADS, NCCL_BUFFSIZE, ...),"
                    + " and the errors: values that are not allowed, a broken config file.",
            ""},
        footer = {"", "Exit status: 0; 1 when a value is not allowed or the config file cannot be read."})
public final class EnvCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--json", description = "print JSON instead of the table")
    boolean json;

    private final Map<String, String> env;
    private final Path homeDir;
    private final Path systemFile;

    /** The command on this process's environment, home directory and /etc/jccl.conf. */
    public EnvCommand() {
        this(System.getenv(), home(), ConfigFile.SYSTEM_FILE);
    }

    /** The command on the given environment and files (tests). */
    public EnvCommand(Map<String, String> env, Path homeDir, Path systemFile) {
        this.env = Objects.requireNonNull(env, "env");
        this.homeDir = homeDir;
        this.systemFile = systemFile;
    }

    private static Path home() {
        String h = System.getProperty("user.home");
        return h == null || h.isBlank() ? null : Path.of(h);
    }

    @Override
    public Integer call() {
        EnvReport r = EnvReport.build(env, homeDir, systemFile);
        PrintWriter out = spec.commandLine().getOut();
        out.print(json ? r.json() : r.text());
        out.flush();
        return r.errors().isEmpty() ? 0 : 1;
    }
}
