package org.jccl;

/** The operating system refused a resource (ports, sockets, file descriptors, memory); the message names the limit and the fix. */
public class ResourceException extends JcclException {
    private static final long serialVersionUID = 1L;

    public ResourceException(String message, Throwable cause) {
        super(ErrorCode.RESOURCE, message, cause);
    }
}
