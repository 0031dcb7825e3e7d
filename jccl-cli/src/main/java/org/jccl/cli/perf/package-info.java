/**
 * {@code jccl perf}: an nccl-tests compatible benchmark. {@link org.jccl.cli.perf.PerfCommand}
 * reads nccl-tests' flags; {@code Benchmark} times and checks the collectives on a
 * communicator; {@code Table} and {@code JsonReport} print nccl-tests' layouts; {@code
 * Collective} holds the per-collective rules (size to count, bus-bandwidth factor).
 *
 * <p>Why mirror nccl-tests so closely: NCCL users already read its tables and have scripts
 * for its JSON. Putting {@code all_reduce_perf -b 8 -e 64M -f 4} next to {@code jccl perf
 * all_reduce -b 8 -e 64M -f 4} must give the same sizes, counts and columns, so that only the
 * measured numbers differ.
 *
 * <p>GPU mode ({@code --device cuda}, {@code -g N}, {@code --backend jccl|nccl}): {@code
 * GpuPerfRunner} sets up the device communicators (N GPUs in this process, or one GPU per launched
 * process), {@code GpuBenchmark} measures one GPU rank on its own thread the way nccl-tests does
 * (operations enqueued back to back on the rank's stream, one stream synchronize, host wall time /
 * iterations), and {@code RankSync} combines times and error counts over the threads of a process
 * and, through the host communicator, over processes. The data check ({@code DataCheck}) is the
 * host benchmark's, with the GPU buffers staged through host memory. jccl's kernels and NCCL run
 * through the same code, so their rows can be compared directly.
 */
package org.jccl.cli.perf;
