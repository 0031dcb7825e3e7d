package org.jccl.cli.run;

import picocli.CommandLine.Command;

/** SKELETON - replaced by the launcher work package. */
@Command(name = "run", description = "start N local ranks")
public final class RunCommand implements java.util.concurrent.Callable<Integer> {
    @Override
    public Integer call() {
        throw new UnsupportedOperationException("run");
    }
}
