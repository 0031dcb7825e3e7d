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
 */
package org.jccl.cli.perf;
