package org.jccl.internal.bootstrap;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Objects;
import org.jccl.Config;

/**
 * How the ranks of a launched job learn where rank 0's bootstrap root listens: a launcher-specific
 * channel through which rank 0 publishes its root's addresses (one or more {@code host:port}, since
 * the root may listen on several interfaces) — and, where the channel is trusted, the job secret —
 * and the other ranks look them up with a deadline ({@code JCCL_INIT_TIMEOUT}).
 *
 * <p>Order on rank 0: bind the root first, on {@link #bindAddresses} (port 0 = an ephemeral port,
 * for channels that can publish it), then {@link #publish}. Every other rank calls {@link #lookup}.
 * A failure names the channel ({@link #describe}) and what to check.
 *
 * <p>Implementations: {@link FixedAddressExchange} ({@code JCCL_COMM_ID}, {@code MASTER_ADDR}:{@code
 * MASTER_PORT}: everybody knows the address, nothing to publish), {@code TorchStoreExchange}
 * (torchrun's agent TCPStore); launcher helpers add PMIx and the Slurm nodelist.
 *
 * <p>One instance serves one initialisation of one rank; {@link #close()} releases whatever
 * connection it holds to the channel.
 */
public interface RootExchange extends AutoCloseable {

    /**
     * The channel in words, for messages and logs: "JCCL_COMM_ID=node0:29500", "torchrun's TCPStore at
     * node0:29500 (key jccl/...)".
     */
    String describe();

    /**
     * Rank 0: where its root must listen, the first being the address that must work (its failure is
     * the error); the others are extra interfaces, skipped with a log line when they cannot be bound.
     * Port 0 picks a free port (the same one on every address).
     */
    List<InetSocketAddress> bindAddresses(Config config);

    /** Whether this channel may carry the job secret (only the job's own processes can read it, e.g. PMIx). */
    default boolean carriesSecret() {
        return false;
    }

    /**
     * Rank 0, once its root listens on {@code listening}: makes them known to the other ranks, with
     * {@code secret} when non-null (only when {@link #carriesSecret()}).
     *
     * @param hostId rank 0's host identity (lets a rank on another host skip rank 0's loopback addresses)
     * @return what every rank, rank 0 included, sees
     * @throws org.jccl.JcclException naming the channel when it cannot publish before the deadline
     */
    Published publish(List<InetSocketAddress> listening, byte[] secret, String hostId, Config config, long deadlineNanos);

    /**
     * Every rank but 0: what rank 0 published, waiting for it until {@code deadlineNanos}.
     *
     * @throws org.jccl.JcclTimeoutException naming the channel when nothing arrives in time
     */
    Published lookup(Config config, long deadlineNanos);

    /** Releases any connection to the channel; idempotent. */
    @Override
    default void close() {
    }

    /**
     * What rank 0 published.
     *
     * @param addresses where its root listens, in the order ranks should try them
     * @param secret the job secret, when the channel carries it; else null
     * @param hostId rank 0's host identity, or null when the channel does not carry it
     * @param jobKey text that every rank of this job sees alike and that no other concurrent job with
     *        the same secret shares; the communicator id is derived from it
     */
    record Published(List<InetSocketAddress> addresses, byte[] secret, String hostId, String jobKey) {
        public Published {
            addresses = List.copyOf(addresses);
            if (addresses.isEmpty()) {
                throw new IllegalArgumentException("no root address");
            }
            Objects.requireNonNull(jobKey, "jobKey");
        }

        @Override
        public String toString() {
            return "Published[" + addresses + ", secret=" + (secret == null ? "none" : "****") + ", host " + hostId + ", key " + jobKey + "]";
        }
    }
}
