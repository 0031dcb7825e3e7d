/**
 * Element-wise reduction kernels on {@link java.lang.foreign.MemorySegment}s: the arithmetic
 * inner loop of every reducing collective (ring all-reduce, reduce-scatter, reduce, tree).
 *
 * <p>{@link org.jccl.internal.reduce.Reductions} is the entry point. It runs one of two sets of
 * kernels, chosen once per JVM: the Vector API loops of
 * {@link org.jccl.internal.reduce.VectorKernels} (when the JVM has {@code --add-modules
 * jdk.incubator.vector}, which every java command line jccl owns passes, and
 * {@code JCCL_REDUCE_VECTOR} is not 0; float16 and bfloat16 only with {@code JCCL_REDUCE_VECTOR=1}),
 * which read and write the segments directly a whole vector at a time, or the scalar loops of
 * {@code Kernels}. For the scalar ones, one switch per call picks the
 * element type; the operands then stream through two small per-thread Java arrays in 4 KiB chunks
 * (bulk copies in native byte order, so any byte offset and any mix of heap and native segments
 * works), and one specialised counted loop per (type, operator) combines each chunk, with no
 * per-element dispatch. Staging keeps the speed independent of which kinds of segments the rest of
 * the process uses and lets C2 vectorize the loops; {@code Kernels} records the measurements.
 *
 * <p>The two agree bit for bit on integers and on every float result that is not NaN (a NaN result
 * is NaN in both, with possibly another sign or payload); {@code VectorKernelsTest} checks it.
 *
 * <p>Semantics follow NCCL's: integer sum and product wrap around, unsigned types compare and
 * divide as unsigned, float16 and bfloat16 are widened to float32 for the operation and rounded
 * back to nearest-even once per call, and {@code AVG} is a sum followed by
 * {@link org.jccl.internal.reduce.Reductions#finishAvg finishAvg} on the final result.
 *
 * <p>Everything here is safe to call from any number of threads at once, as long as no two threads
 * write the same memory.
 */
package org.jccl.internal.reduce;
