package org.jccl.cli;

import org.jccl.Jccl;
import org.jccl.JcclException;
import org.jccl.cli.env.EnvCommand;
import org.jccl.cli.perf.PerfCommand;
import org.jccl.cli.plot.PlotCommand;
import org.jccl.cli.run.RunCommand;
import org.jccl.cli.status.StatusCommand;
import org.jccl.cli.topo.DoctorCommand;
import org.jccl.cli.topo.TopoCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code jccl} command. Subcommands: perf, plot, run, topo, doctor, env, status. */
@Command(name = "jccl", mixinStandardHelpOptions = true, versionProvider = JcclCli.Version.class,
        description = "jccl: collective communication for the JVM.",
        subcommands = {PerfCommand.class, PlotCommand.class, RunCommand.class, TopoCommand.class, DoctorCommand.class, EnvCommand.class, StatusCommand.class,
                CommandLine.HelpCommand.class})
public final class JcclCli implements Runnable {

    public static void main(String[] args) {
        BootStderr.restore(); // first: bin/jccl's filter of the JVM's boot-time incubator warning ends here
        System.exit(execute(args));
    }

    /** Runs the command line and returns the exit code (tests call this instead of main). */
    public static int execute(String... args) {
        return withErrorHandler(new CommandLine(new JcclCli())).execute(args);
    }

    /**
     * Installs jccl's handler on {@code cl}: jccl's own errors already name the cause and the fix,
     * so they are printed as one line (exit code 1), not as a stack trace; anything else propagates.
     */
    static CommandLine withErrorHandler(CommandLine cl) {
        cl.setExecutionExceptionHandler((ex, cmd, parsed) -> {
            if (ex instanceof JcclException je) {
                cmd.getErr().println("jccl " + cmd.getCommandName() + ": " + je.getMessage());
                return 1;
            }
            throw ex;
        });
        return cl;
    }

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }

    /** Prints jccl's version. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[] {"jccl " + Jccl.version() + " (Java " + Runtime.version() + ")"};
        }
    }
}
