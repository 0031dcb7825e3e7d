/**
 * What the transports share: {@link org.jccl.internal.transport.AbstractRegisteredRegion} and {@link
 * org.jccl.internal.transport.AbstractRemoteRegion}, the bookkeeping of the one-sided region handles
 * (open flag, idempotent close, the deregistered check) that every transport's
 * {@code RegisteredRegion} and {@code RemoteRegion} would otherwise repeat. The transports themselves
 * are the subpackages {@code local}, {@code shm} and {@code tcp}; this package depends on
 * {@code org.jccl.spi} only.
 */
package org.jccl.internal.transport;
