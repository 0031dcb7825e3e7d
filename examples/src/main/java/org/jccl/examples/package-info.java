/**
 * Small, complete programs that use only jccl's public API ({@code org.jccl}), each with a
 * {@code main}: {@link org.jccl.examples.AllReduceExample} is the README's first program, and
 * {@link org.jccl.examples.CollectiveCheck} checks every collective across real processes against
 * an exact reference, for launchers (jccl run, torchrun, mpirun, srun) and CI alike.
 */
package org.jccl.examples;
