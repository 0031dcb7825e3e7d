package org.jccl.spi;

/**
 * A peer's {@link RegisteredRegion} as this rank sees it: made by {@link Connection#unpack(byte[])}
 * from the peer's packed key, on the connection to that peer, and used only with that connection's
 * {@link Connection#put puts}. UCX's counterpart is a {@code ucp_rkey_h} from {@code ucp_ep_rkey_unpack}.
 * Offsets passed to {@code put} count from the start of the peer's region.
 *
 * <p><b>Threading contract:</b> like its connection (operation thread); {@link #close()} also from
 * any thread, idempotently. Closing releases this rank's handle (a mapping, an unpacked key), never
 * the peer's memory.
 */
public interface RemoteRegion extends AutoCloseable {

    /** The rank that registered the region (the peer of the connection that unpacked it). */
    int owner();

    /** Length in bytes of the peer's region. */
    long length();

    /** Where the peer's memory lives. */
    MemoryType type();

    /** False once {@link #close()}d or its connection closed. */
    boolean isOpen();

    /** For messages: "rank 1's SHM region #3 (65536 B)". */
    String describe();

    /** Releases this rank's handle. Idempotent; any thread. */
    @Override
    void close();

    /**
     * The bounds check every {@code put} makes before any byte moves: {@code length} bytes at
     * {@code offset} must lie inside {@code region}.
     *
     * @throws IndexOutOfBoundsException naming both ranges, e.g. "a put of bytes [4000, 4100) is outside
     *         rank 1's SHM region #3 (4096 B), whose bytes are [0, 4096): nothing was written"
     */
    static void checkBounds(RemoteRegion region, long offset, long length) {
        if (length < 0) {
            throw new IllegalArgumentException("a put of " + length + " bytes into " + region.describe() + ": the length must not be negative");
        }
        if (offset < 0 || offset > region.length() - length) {
            throw new IndexOutOfBoundsException("a put of bytes [" + offset + ", " + Long.toUnsignedString(offset + length) + ") is outside " + region.describe()
                    + ", whose bytes are [0, " + region.length() + "): nothing was written");
        }
    }
}
