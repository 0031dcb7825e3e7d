/**
 * How the processes of a job find each other: every rank connects to one {@link
 * org.jccl.internal.bootstrap.BootstrapRoot} (run by rank 0 or by {@code JcclId.create()}),
 * proves the job secret, registers its {@link org.jccl.spi.PeerInfo}, and gets back the table of
 * all ranks ({@link org.jccl.internal.bootstrap.Bootstrap#rendezvous}). The root checks that the
 * ranks agree on the world size and that no rank is claimed twice, and at the init deadline names
 * the ranks that never arrived. Peer infos travel in {@link
 * org.jccl.internal.bootstrap.PeerInfoCodec}'s binary encoding.
 */
package org.jccl.internal.bootstrap;
