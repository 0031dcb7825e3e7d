package org.jccl.internal.topo;

import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Size and free space of the file system holding a directory (statvfs): injectable so that a test
 * can say "this /dev/shm is 64 MiB" without mounting anything.
 */
@FunctionalInterface
public interface FsStats {

    /**
     * Size and free bytes of {@code dir}'s file system.
     *
     * @return {@code {total, usable}}, or null when the directory does not exist or cannot be examined
     */
    long[] stat(Path dir);

    /** The real file systems, through {@link FileStore}. */
    FsStats SYSTEM = dir -> {
        try {
            if (!Files.isDirectory(dir)) {
                return null;
            }
            FileStore fs = Files.getFileStore(dir);
            return new long[] {fs.getTotalSpace(), fs.getUsableSpace()};
        } catch (IOException | SecurityException e) {
            return null;
        }
    };

    /** Fixed answers (tests). */
    static FsStats fixed(long total, long free) {
        return dir -> new long[] {total, free};
    }
}
