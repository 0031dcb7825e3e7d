package org.jccl;

/** A setting has a value that is not allowed. The message names the variable, the value and what is allowed. */
public class ConfigException extends JcclException {
    private static final long serialVersionUID = 1L;

    public ConfigException(String message) {
        super(ErrorCode.CONFIG, message);
    }

    public ConfigException(String message, Throwable cause) {
        super(ErrorCode.CONFIG, message, cause);
    }
}
