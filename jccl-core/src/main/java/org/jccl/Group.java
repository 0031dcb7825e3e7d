package org.jccl;

/**
 * A batch of operations issued as one fused step, like {@code ncclGroupStart()/ncclGroupEnd()}:
 * <pre>{@code
 * try (Group g = comm.group()) {
 *     comm.send(a, right);
 *     comm.recv(b, left);      // would deadlock against the neighbour if run one by one
 * }                            // close() posts every send and receive together and waits for all
 * }</pre>
 * Between {@link Communicator#group()} and {@link #close()}, operations called on that communicator
 * <em>from the thread that opened the group</em> are recorded, not run; blocking calls return at
 * once, and their buffers must stay untouched until {@code close()} returns. Work handles of
 * asynchronous calls made inside the group complete with it. Groups nest: only the outermost
 * {@code close()} runs the batch.
 */
public interface Group extends AutoCloseable {

    /** Runs the batch and waits for it; throws the first failure of any operation in it. */
    @Override
    void close();
}
