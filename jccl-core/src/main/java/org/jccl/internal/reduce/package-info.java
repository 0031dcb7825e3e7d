/**
 * Element-wise reduction kernels on {@link java.lang.foreign.MemorySegment}s: the arithmetic
 * inner loop of every reducing collective (ring all-reduce, reduce-scatter, reduce, tree).
 *
 * <p>{@link org.jccl.internal.reduce.Reductions} is the entry point. It picks one specialised loop
 * per (element type, operator) with a switch outside the loop, so the JIT sees a plain counted
 * loop of loads, one arithmetic instruction and a store, with no per-element dispatch. The loops
 * read and write through the {@code *_UNALIGNED} value layouts in native byte order, because
 * transport buffers and user slices may start at any byte offset and may be heap or native.
 *
 * <p>Semantics follow NCCL's: integer sum and product wrap around, unsigned types compare and
 * divide as unsigned, float16 and bfloat16 are widened to float32 for the operation and rounded
 * back to nearest-even once per call, and {@code AVG} is a sum followed by
 * {@link org.jccl.internal.reduce.Reductions#finishAvg finishAvg} on the final result.
 *
 * <p>Everything here is stateless and safe to call from any number of threads at once, as long as
 * no two threads write the same memory.
 */
package org.jccl.internal.reduce;
