package org.jccl;

import java.time.Duration;

/**
 * Handle of an asynchronous operation. Operations on one communicator complete in the order they
 * were issued. Safe to use from any thread.
 */
public interface Work {

    /**
     * Waits until the operation completes.
     *
     * @throws JcclException the operation's failure ({@link PeerFailedException}, {@link JcclTimeoutException}, ...)
     */
    void join();

    /**
     * Waits at most {@code timeout}. A timeout here is not a failure of the operation, which goes on;
     * the communicator stays usable.
     *
     * @return true when the operation completed (successfully) within the time
     * @throws JcclException when the operation failed
     */
    boolean join(Duration timeout);

    /** True once the operation completed, successfully or not. Never blocks. */
    boolean isDone();
}
