package org.jccl.internal.runtime;

import org.jccl.DataType;
import org.jccl.ReduceOp;

/** An {@link Op} whose body is a lambda over already staged segments. */
final class LambdaOp extends Op {

    /** The body of an operation. */
    @FunctionalInterface
    interface Body {
        void run(OpContext ctx) throws Exception;
    }

    private final Body body;

    LambdaOp(String name, long bytes, DataType type, ReduceOp reduceOp, int rootOrPeer, Body body) {
        super(name, bytes, type, reduceOp, rootOrPeer);
        this.body = body;
    }

    @Override
    void run(OpContext ctx) throws Exception {
        body.run(ctx);
    }
}
