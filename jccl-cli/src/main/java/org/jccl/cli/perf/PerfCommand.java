package org.jccl.cli.perf;

import picocli.CommandLine.Command;

/** SKELETON - replaced by the perf work package. */
@Command(name = "perf", description = "nccl-tests compatible benchmark")
public final class PerfCommand implements java.util.concurrent.Callable<Integer> {
    @Override
    public Integer call() {
        throw new UnsupportedOperationException("perf");
    }
}
