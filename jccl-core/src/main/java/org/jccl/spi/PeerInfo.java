package org.jccl.spi;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * What one rank tells every other rank at bootstrap: where it runs and how to reach it over each
 * transport. Exchanged in a versioned binary encoding ({@code PeerInfoCodec}), never Java serialization.
 *
 * @param rank the rank in the communicator being created
 * @param host the host name, for messages
 * @param pid the process id, for messages
 * @param hostHash identifies the host (boot id + host name): equal hashes mean "same machine", which
 *        same-host transports (shared memory) require
 * @param processId identifies the JVM (random per process start): equal ids mean "same JVM"
 * @param addresses each transport's endpoint address, by transport name, opaque to everyone else
 */
public record PeerInfo(int rank, String host, long pid, String hostHash, String processId, Map<String, byte[]> addresses) {

    public PeerInfo {
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(hostHash, "hostHash");
        Objects.requireNonNull(processId, "processId");
        addresses = Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(addresses, "addresses")));
    }

    /** The same info with another rank number (used when a communicator is split). */
    public PeerInfo withRank(int newRank) {
        return new PeerInfo(newRank, host, pid, hostHash, processId, addresses);
    }

    /** The same info with one transport address added or replaced. */
    public PeerInfo withAddress(String transport, byte[] address) {
        Map<String, byte[]> a = new LinkedHashMap<>(addresses);
        a.put(transport, address);
        return new PeerInfo(rank, host, pid, hostHash, processId, a);
    }

    /** "rank 3 (node7 pid 4242)", the way errors name a peer. */
    public String describe() {
        return "rank " + rank + " (" + host + " pid " + pid + ")";
    }
}
