/**
 * The shared-memory transport for ranks of one host: one single-producer single-consumer ring per
 * direction per peer pair, in files under {@code JCCL_SHM_DIR} mapped into MemorySegments, reserved
 * in full at communicator creation and unlinked once both sides have mapped them. Synchronisation is
 * only acquire/release (VarHandle) on the mapped memory; no Unsafe, no JNI. {@link
 * org.jccl.internal.transport.shm.ShmRingDescriptor} documents the layout.
 */
package org.jccl.internal.transport.shm;
