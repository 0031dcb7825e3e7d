package org.jccl.internal.config;

import java.util.Map;
import java.util.Optional;
import org.jccl.Config;

/** SKELETON - to be implemented by the bootstrap work package. */
public final class LaunchEnvironment {
    private LaunchEnvironment() {
    }

    public static Optional<Config.Launch> detect(Map<String, String> env) {
        return Optional.empty();
    }
}
