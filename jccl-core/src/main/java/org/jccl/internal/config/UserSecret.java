package org.jccl.internal.config;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import org.jccl.ConfigException;
import org.jccl.JcclId;

/**
 * The per-user job secret, for launchers that hand out none (torchrun, and mpirun/srun where no
 * trusted channel carries one): a file of 32 hex digits, by default {@code ~/.jccl/secret}
 * ({@code JCCL_SECRET_FILE} names another), made on first use — Erlang's cookie. Clusters share
 * home directories, so every rank of a user's job reads the same secret; other users cannot read
 * it, so they cannot join, read or inject data.
 *
 * <p>Creation is atomic and safe when ranks on several hosts sharing an NFS home create it at
 * once: the secret is written and synced to a temporary file of mode 0600 in the same directory,
 * which is then hard-linked to the final name; {@code link(2)} fails if the name exists (it never
 * replaces), so exactly one creator wins and everyone, the losers included, reads the winner's
 * file. A directory made here gets mode 0700.
 *
 * <p>A file that others may read or write (any group/other permission bit), that is not owned by
 * this user, or in a directory that others may write, is refused with the fix ({@code chmod 600},
 * or remove it); so is one that is not 32 hex digits, or that cannot be read. Stateless.
 */
public final class UserSecret {

    /** The variable naming the file instead of {@code ~/.jccl/secret}. */
    public static final String FILE_VARIABLE = "JCCL_SECRET_FILE";

    private static final Set<PosixFilePermission> OWNER_RW = EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE);
    private static final Set<PosixFilePermission> OWNER_RWX = EnumSet.of(PosixFilePermission.OWNER_READ,
            PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
    private static final Set<PosixFilePermission> OTHERS = EnumSet.of(PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
            PosixFilePermission.OTHERS_EXECUTE);
    private static final Set<PosixFilePermission> OTHERS_WRITE = EnumSet.of(PosixFilePermission.GROUP_WRITE,
            PosixFilePermission.OTHERS_WRITE);
    private static final SecureRandom RANDOM = new SecureRandom();
    /** How long a reader waits for a file that exists but is still being written (a creator without hard links). */
    private static final long PARTIAL_WAIT_MS = 2_000;

    private UserSecret() {
    }

    /**
     * The secret file for {@code env}: {@code JCCL_SECRET_FILE} when set, else {@code <userHome>/.jccl/secret}.
     *
     * @throws ConfigException when neither says where (no home directory)
     */
    public static Path location(Map<String, String> env, String userHome) {
        String named = env.get(FILE_VARIABLE);
        if (named != null && !named.isBlank()) {
            return Path.of(named.trim()).toAbsolutePath();
        }
        if (userHome == null || userHome.isBlank() || userHome.equals("?")) {
            throw new ConfigException("no job secret: JCCL_AUTH_TOKEN is not set and this process has no home directory for"
                    + " ~/.jccl/secret; set " + FILE_VARIABLE + " to a file every rank of the job can read (it is made on first"
                    + " use, mode 0600), or JCCL_AUTH_TOKEN to the same 32 hex digits on every rank (`openssl rand -hex 16`)");
        }
        return Path.of(userHome, ".jccl", "secret").toAbsolutePath();
    }

    /**
     * Reads the secret in {@code file}, creating file (and its directory, mode 0700) with a fresh
     * random secret when it does not exist.
     *
     * @throws ConfigException naming the file, what is wrong and the fix
     */
    public static byte[] readOrCreate(Path file) {
        for (int attempt = 0; ; attempt++) {
            if (Files.exists(file, LinkOption.NOFOLLOW_LINKS) || Files.isSymbolicLink(file)) {
                return read(file);
            }
            try {
                create(file);
                return read(file);
            } catch (FileAlreadyExistsException e) {
                // Another rank made it first: read the winner's (loop once more, it exists now).
                if (attempt > 3) {
                    return read(file);
                }
            }
        }
    }

    /**
     * Reads an existing secret file after checking its owner and mode.
     *
     * @throws ConfigException naming the file, what is wrong and the fix
     */
    public static byte[] read(Path file) {
        checkDirectory(file.getParent());
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(file, PosixFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new ConfigException("the job secret file " + file + " does not exist (a dangling link?); remove it, and jccl makes a"
                    + " new one on first use", e);
        } catch (UnsupportedOperationException e) {
            throw new ConfigException("the job secret file " + file + " is on a file system without POSIX permissions, so jccl cannot"
                    + " check that only you can read it; set " + FILE_VARIABLE + " to a file on a POSIX file system, or JCCL_AUTH_TOKEN", e);
        } catch (IOException e) {
            throw unreadable(file, e);
        }
        if (!a.isRegularFile()) {
            throw new ConfigException("the job secret file " + file + " is not a regular file; remove it, and jccl makes a new one on"
                    + " first use (or set " + FILE_VARIABLE + " to another path)");
        }
        checkOwner(file, a);
        Set<PosixFilePermission> extra = EnumSet.copyOf(a.permissions());
        extra.retainAll(OTHERS);
        if (!extra.isEmpty()) {
            throw new ConfigException("the job secret file " + file + " has mode " + PosixFilePermissions.toString(a.permissions())
                    + ": other users may read or change it, so they could join your jobs; fix it with `chmod 600 " + file + "`"
                    + " (and make a new secret with `rm " + file + "` if others may have read it)");
        }
        long deadline = System.nanoTime() + PARTIAL_WAIT_MS * 1_000_000L;
        while (true) {
            String text;
            try {
                text = Files.readString(file, StandardCharsets.US_ASCII);
            } catch (IOException e) {
                throw unreadable(file, e);
            }
            String t = text.strip();
            if (t.length() == 2 * JcclId.SECRET_BYTES) {
                try {
                    return HexFormat.of().parseHex(t);
                } catch (IllegalArgumentException e) {
                    throw notASecret(file, "it has characters other than hex digits");
                }
            }
            if (t.length() < 2 * JcclId.SECRET_BYTES && System.nanoTime() < deadline) {
                // A creator on a file system without hard links writes in place: give it a moment.
                sleep(20);
                continue;
            }
            throw notASecret(file, "it holds " + t.length() + " characters");
        }
    }

    /** A short fingerprint of {@code secret} for messages: lets two hosts compare secrets without showing them. */
    public static String fingerprint(byte[] secret) {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            d.update("jccl-secret-fingerprint".getBytes(StandardCharsets.US_ASCII));
            byte[] h = d.digest(secret);
            return HexFormat.of().formatHex(h, 0, 4);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK", e);
        }
    }

    // ------------------------------------------------------------------------------------------ creation

    private static void create(Path file) throws FileAlreadyExistsException {
        Path dir = file.getParent();
        try {
            if (!Files.isDirectory(dir)) {
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(OWNER_RWX));
                try {
                    Files.setPosixFilePermissions(dir, OWNER_RWX);
                } catch (IOException e) {
                    // Another rank's directory (made between our check and create): checkDirectory judges it.
                }
            }
        } catch (FileAlreadyExistsException e) {
            // Made by another rank meanwhile, or a file in the way: checkDirectory says which.
        } catch (IOException | UnsupportedOperationException e) {
            throw cannotCreate(file, e);
        }
        checkDirectory(dir);
        byte[] secret = new byte[JcclId.SECRET_BYTES];
        RANDOM.nextBytes(secret);
        byte[] text = (HexFormat.of().formatHex(secret) + "\n").getBytes(StandardCharsets.US_ASCII);
        Path tmp = null;
        try {
            tmp = Files.createTempFile(dir, ".secret-", ".tmp", PosixFilePermissions.asFileAttribute(OWNER_RW));
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
                ByteBuffer b = ByteBuffer.wrap(text);
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                ch.force(true);
            }
            try {
                // link(2) never replaces an existing name: one creator wins, also over NFS.
                Files.createLink(file, tmp);
            } catch (UnsupportedOperationException | IOException e) {
                if (e instanceof FileAlreadyExistsException fe) {
                    throw fe;
                }
                createInPlace(file, text);
            }
        } catch (FileAlreadyExistsException e) {
            throw e;
        } catch (IOException | UnsupportedOperationException e) {
            throw cannotCreate(file, e);
        } finally {
            if (tmp != null) {
                try {
                    Files.deleteIfExists(tmp);
                } catch (IOException e) {
                    // A stray temporary file of mode 0600 holds a secret nobody uses; harmless.
                }
            }
        }
    }

    /** For file systems without hard links: O_CREAT|O_EXCL, then write; readers wait for the whole line. */
    private static void createInPlace(Path file, byte[] text) throws IOException {
        try (FileChannel ch = FileChannel.open(file, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
                PosixFilePermissions.asFileAttribute(OWNER_RW))) {
            ByteBuffer b = ByteBuffer.wrap(text);
            while (b.hasRemaining()) {
                ch.write(b);
            }
            ch.force(true);
        }
    }

    // ------------------------------------------------------------------------------------------ checks

    private static void checkDirectory(Path dir) {
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(dir, PosixFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new ConfigException("the directory " + dir + " of the job secret file does not exist and could not be made; create"
                    + " it with `mkdir -m 700 " + dir + "`, or set " + FILE_VARIABLE + " elsewhere", e);
        } catch (IOException | UnsupportedOperationException e) {
            throw new ConfigException("cannot check the directory " + dir + " of the job secret file (" + e + "); set "
                    + FILE_VARIABLE + " to a file in a directory you own, or JCCL_AUTH_TOKEN", e);
        }
        if (!a.isDirectory()) {
            throw new ConfigException(dir + " (where the job secret file goes) is not a directory; remove it, or set " + FILE_VARIABLE
                    + " to another path");
        }
        Set<PosixFilePermission> w = EnumSet.copyOf(a.permissions());
        w.retainAll(OTHERS_WRITE);
        if (!w.isEmpty() && !a.permissions().isEmpty() && !isSticky(dir)) {
            throw new ConfigException("the directory " + dir + " of the job secret file has mode "
                    + PosixFilePermissions.toString(a.permissions()) + ": other users may replace the secret in it; fix it with"
                    + " `chmod 700 " + dir + "`, or set " + FILE_VARIABLE + " to a file in a directory only you can write");
        }
    }

    private static boolean isSticky(Path dir) {
        try {
            Object mode = Files.getAttribute(dir, "unix:mode");
            return mode instanceof Integer m && (m & 01000) != 0;
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return false;
        }
    }

    private static void checkOwner(Path file, PosixFileAttributes a) {
        Integer fileUid = uid(file);
        Integer myUid = uid(Path.of("/proc/self"));
        boolean mine;
        if (fileUid != null && myUid != null) {
            mine = fileUid.intValue() == myUid.intValue();
        } else {
            mine = a.owner().getName().equals(System.getProperty("user.name"));
        }
        if (!mine) {
            throw new ConfigException("the job secret file " + file + " is owned by " + a.owner().getName() + ", not by you ("
                    + System.getProperty("user.name") + "): someone else chose that secret; remove it (`rm " + file + "`), and jccl"
                    + " makes a new one on first use, or set " + FILE_VARIABLE + " to a file of your own");
        }
    }

    private static Integer uid(Path p) {
        try {
            Object v = Files.getAttribute(p, "unix:uid");
            return v instanceof Integer i ? i : null;
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return null;
        }
    }

    private static ConfigException unreadable(Path file, IOException e) {
        String why = e instanceof AccessDeniedException ? "permission denied" : e.toString();
        return new ConfigException("the job secret file " + file + " cannot be read (" + why + "); make it yours and readable with"
                + " `chmod 600 " + file + "` (as its owner), or remove it and jccl makes a new one on first use; or set "
                + FILE_VARIABLE + " to another file, or JCCL_AUTH_TOKEN", e);
    }

    private static ConfigException notASecret(Path file, String why) {
        return new ConfigException("the job secret file " + file + " is not a jccl secret (" + why + "; expected 32 hex digits):"
                + " remove it, and jccl makes a new one on first use (every host of a job must then see the same file), or write one"
                + " with `(umask 077; openssl rand -hex 16 > " + file + ")`");
    }

    private static ConfigException cannotCreate(Path file, Exception e) {
        return new ConfigException("no job secret: JCCL_AUTH_TOKEN is not set and the secret file " + file + " does not exist and"
                + " cannot be created (" + e + "); set " + FILE_VARIABLE + " to a writable path that every rank of the job sees (a"
                + " shared home or volume; it is made on first use, mode 0600), or JCCL_AUTH_TOKEN to the same 32 hex digits on every"
                + " rank", e);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ConfigException("interrupted while reading the job secret file", e);
        }
    }
}
