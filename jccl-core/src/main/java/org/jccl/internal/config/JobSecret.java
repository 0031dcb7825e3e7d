package org.jccl.internal.config;

import java.nio.file.Path;
import java.util.Objects;

/**
 * Where a launched job's secret comes from, in the order of precedence of docs/DEPLOY.md ("Secrets
 * and trust"): an explicit {@code JCCL_AUTH_TOKEN} wins; else a secret that a trusted launcher
 * channel hands out (the root exchange says whether it does, e.g. PMIx); else the per-user secret
 * file ({@link UserSecret}). The file is read only when the secret is needed ({@code Jccl.init}),
 * never when a config is merely built ({@code jccl env}).
 */
public final class JobSecret {

    private final byte[] explicit;
    private final String explicitSource;
    private final Path file;

    private JobSecret(byte[] explicit, String explicitSource, Path file) {
        this.explicit = explicit;
        this.explicitSource = explicitSource;
        this.file = file;
    }

    /** A secret given explicitly, e.g. by {@code JCCL_AUTH_TOKEN}; {@code source} names where for messages. */
    public static JobSecret explicit(byte[] secret, String source) {
        return new JobSecret(secret.clone(), Objects.requireNonNull(source, "source"), null);
    }

    /** The per-user secret file at {@code file} (read or made when needed). */
    public static JobSecret file(Path file) {
        return new JobSecret(null, null, Objects.requireNonNull(file, "file"));
    }

    /** Whether the secret was given explicitly (it then wins over any launcher channel). */
    public boolean isExplicit() {
        return explicit != null;
    }

    /** The secret file consulted when nothing else gives one, or null for an explicit secret. */
    public Path file() {
        return file;
    }

    /**
     * The explicit secret, or the file's (made on first use).
     *
     * @throws org.jccl.ConfigException when the file cannot be used, naming the fix
     */
    public Resolved resolve() {
        if (explicit != null) {
            return new Resolved(explicit.clone(), explicitSource);
        }
        return new Resolved(UserSecret.readOrCreate(file), "the secret file " + file);
    }

    /** "JCCL_AUTH_TOKEN", "the secret file /home/u/.jccl/secret". */
    public String describe() {
        return explicit != null ? explicitSource : "the secret file " + file;
    }

    /**
     * A secret and where it came from.
     *
     * @param secret the 16 bytes
     * @param source for messages: "JCCL_AUTH_TOKEN", "the secret file /home/u/.jccl/secret", "rank 0 through PMIx"
     */
    public record Resolved(byte[] secret, String source) {
        public Resolved {
            Objects.requireNonNull(secret, "secret");
            Objects.requireNonNull(source, "source");
        }

        /** {@code source} with the secret's fingerprint, for messages that help compare two hosts' secrets. */
        public String describe() {
            return source + " (fingerprint " + UserSecret.fingerprint(secret) + ")";
        }

        @Override
        public String toString() {
            return "Resolved[" + describe() + "]";
        }
    }

    @Override
    public String toString() {
        return "JobSecret[" + describe() + "]";
    }
}
