/**
 * {@code jccl run}: the one-host launcher. {@link org.jccl.cli.run.LocalLauncher} starts N processes with
 * the jccl job environment ({@code JCCL_COMM_ID}, {@code JCCL_RANK}, {@code JCCL_WORLD_SIZE},
 * {@code JCCL_LOCAL_RANK}, {@code JCCL_LOCAL_SIZE}, a fresh {@code JCCL_AUTH_TOKEN}), passes their output on
 * line by line with a {@code [rank]} prefix, and stops the whole job as soon as one rank fails, so a
 * crashed rank never leaves the others waiting out their init timeout. {@link org.jccl.cli.run.RunCommand}
 * is its command line; {@code jccl perf -np N} uses the launcher too.
 *
 * <p>Launching across machines is left to the launchers that already do it (mpirun, srun, torchrun,
 * Kubernetes); {@code Config.fromEnvironment()} reads their conventions.
 */
package org.jccl.cli.run;
