/**
 * What launchers tell a process: its rank, size and local rank from the launchers' variables ({@link
 * org.jccl.internal.launch.LaunchEnvironment}), and beyond them, through the channel {@link
 * org.jccl.internal.launch.LauncherChannels} picks: the PMIx client ({@link org.jccl.internal.launch.Pmix},
 * libpmix through FFM, served by mpirun and {@code srun --mpi=pmix}) and Slurm's node lists and task
 * layouts ({@link org.jccl.internal.launch.Hostlist}, {@link org.jccl.internal.launch.SlurmStep}), from
 * which rank 0's bootstrap address is found without {@code MASTER_ADDR} or {@code JCCL_COMM_ID}.
 */
package org.jccl.internal.launch;
