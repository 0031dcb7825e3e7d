/**
 * jccl's public API: {@link org.jccl.Jccl} creates {@link org.jccl.Communicator}s, which run
 * collectives on {@link org.jccl.Buffer}s of a {@link org.jccl.DataType} with a {@link
 * org.jccl.ReduceOp}; asynchronous calls return {@link org.jccl.Work}; {@link org.jccl.Group}
 * fuses several calls into one step. Everything a user sees going wrong is a {@link
 * org.jccl.JcclException} with an {@link org.jccl.ErrorCode}.
 */
package org.jccl;
