package org.jccl.internal.runtime;

import java.util.ArrayList;
import java.util.List;
import org.jccl.Group;
import org.jccl.InvalidUsageException;

/** Records operations issued by one thread between {@code group()} and {@code close()}. */
final class GroupImpl implements Group {
    private final CommunicatorImpl comm;
    private final Thread owner = Thread.currentThread();
    final List<Op> ops = new ArrayList<>();
    int depth = 1;
    private boolean closed;

    GroupImpl(CommunicatorImpl comm) {
        this.comm = comm;
    }

    @Override
    public void close() {
        if (Thread.currentThread() != owner) {
            throw new InvalidUsageException("a group must be closed by the thread that opened it (" + owner.getName() + ")");
        }
        if (closed) {
            return;
        }
        if (--depth > 0) {
            return;
        }
        closed = true;
        comm.endGroup(this);
    }
}
