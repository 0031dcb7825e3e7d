package org.jccl.spi;

/**
 * A transport was asked for memory registration or a one-sided operation it does not offer. Callers
 * check the capability first ({@link Endpoint#canRegister(MemoryType)}, {@link Endpoint#canAllocate()},
 * {@link Connection#supportsPut()}), so this is a programming error, thrown before anything is
 * registered or moved; the message names the transport, the operation and what to do instead.
 */
public class OneSidedUnsupportedException extends UnsupportedOperationException {
    private static final long serialVersionUID = 1L;

    /** The transport ("TCP"), or for connections its {@link Connection#describe()}. */
    private final String transport;

    /**
     * Makes the message: "TCP does not support memory registration: ask ... first".
     *
     * @param transport the transport's name, or the connection's description
     * @param operation what was asked ("memory registration", "one-sided put")
     * @param advice what to do instead; null for the generic advice (check the capability, use send/recv)
     */
    public OneSidedUnsupportedException(String transport, String operation, String advice) {
        super(transport + " does not support " + operation + ": "
                + (advice != null ? advice : "ask Endpoint#canRegister / Endpoint#canAllocate / Connection#supportsPut first, and move"
                        + " data over this transport with two-sided send/recv"));
        this.transport = transport;
    }

    /** The transport's name, or the connection's description, as given to the constructor. */
    public String transport() {
        return transport;
    }
}
