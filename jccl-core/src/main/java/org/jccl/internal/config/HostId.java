package org.jccl.internal.config;

import java.util.ArrayList;
import java.util.List;
import org.jccl.ConfigException;

/**
 * The grammar of {@code JCCL_HOSTID} (NCCL's {@code NCCL_HOSTID}: a string that replaces the host
 * identity). One id applies to every rank of the process; a comma list gives rank r the r-th id,
 * so that the ranks of one machine (threads of one JVM, or the processes of {@code jccl run}, which
 * all see the same environment) can stand in for ranks on several hosts: {@code a,a,b,b} puts ranks
 * 0 and 1 on host a and ranks 2 and 3 on host b; {@code id*k} stands for k entries ({@code a*4,b*4}: ranks
 * 0-3 on a, 4-7 on b). Ranks with different ids never use a same-host
 * transport (in-JVM, SHM) between them, and the hierarchical collectives treat them as remote.
 */
public final class HostId {
    /** Largest repeat count of {@code id*count}. */
    private static final int MAX_REPEAT = 1 << 20;

    private HostId() {
    }

    /**
     * The ids of a value, in order, {@code id*k} expanded.
     *
     * @throws ConfigException on an empty id (a stray comma), an empty value or a bad repeat count
     */
    public static List<String> parse(String value) {
        List<String> ids = new ArrayList<>();
        for (String part : value.split(",", -1)) {
            String id = part.trim();
            int times = 1;
            int star = id.lastIndexOf('*');
            if (star >= 0) {
                String n = id.substring(star + 1).trim();
                id = id.substring(0, star).trim();
                try {
                    times = Integer.parseInt(n);
                } catch (NumberFormatException e) {
                    times = -1;
                }
                if (times < 1 || times > MAX_REPEAT) {
                    throw new ConfigException("JCCL_HOSTID='" + value + "' repeats a host id '" + n + "' times; after * give a count"
                            + " from 1 to " + MAX_REPEAT + ", e.g. a*4,b*4 for ranks 0-3 on host a and 4-7 on host b");
                }
            }
            if (id.isEmpty()) {
                throw new ConfigException("JCCL_HOSTID='" + value + "' has an empty host id; expected one id (every rank of this"
                        + " process) or a comma list with one id per rank, e.g. a,a,b,b or a*2,b*2");
            }
            for (int i = 0; i < times; i++) {
                ids.add(id);
            }
        }
        return ids;
    }

    /**
     * The host id of {@code rank} in a job of {@code size} ranks from {@code config}'s JCCL_HOSTID, or
     * null when it is not set.
     *
     * @throws ConfigException naming where the value was set, when it does not fit the job
     */
    public static String resolve(org.jccl.Config config, int rank, int size) {
        String v = Settings.HOSTID.getString(config);
        if (v == null || v.isBlank()) {
            return null;
        }
        try {
            return resolve(v, rank, size);
        } catch (ConfigException e) {
            throw Settings.HOSTID.withOrigin(e, config);
        }
    }

    /**
     * The host id of {@code rank} in a job of {@code size} ranks under {@code value}.
     *
     * @throws ConfigException when a list's length is not {@code size}
     */
    public static String resolve(String value, int rank, int size) {
        List<String> ids = parse(value);
        if (ids.size() == 1 && !value.contains("*")) {
            return ids.getFirst();
        }
        if (ids.size() != size) {
            throw new ConfigException("JCCL_HOSTID='" + value + "' lists " + ids.size() + " host ids but the job has " + size
                    + " ranks; give one id per rank (rank r takes the r-th), or a single id for every rank of this process");
        }
        return ids.get(rank);
    }
}
