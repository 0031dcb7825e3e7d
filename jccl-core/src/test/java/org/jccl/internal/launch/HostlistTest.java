package org.jccl.internal.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Slurm host lists: every rule of hostlist.c that jccl follows, the errors, and agreement with Slurm's own scontrol. */
@Timeout(30)
class HostlistTest {

    private static void check(String list, String... hosts) {
        assertEquals(List.of(hosts), Hostlist.expand(list), list);
    }

    private static String error(String list) {
        return assertThrows(IllegalArgumentException.class, () -> Hostlist.expand(list), list).getMessage();
    }

    @Test
    void singleHostsAndSeparators() {
        check("vm", "vm");
        check("a,b", "a", "b");
        check("a,,b  c\td\ne", "a", "b", "c", "d", "e");
        check(" a ", "a");
        check("10.213.0.5", "10.213.0.5");
        check("node-1.cluster", "node-1.cluster");
        check("");
    }

    @Test
    void rangesKeepTheZeroPaddingOfTheirStart() {
        check("node[01-04,07]", "node01", "node02", "node03", "node04", "node07");
        check("n[8-10]", "n8", "n9", "n10");
        check("n[08-10]", "n08", "n09", "n10");
        check("n[008-10],m", "n008", "n009", "n010", "m");
        check("a[1-010]", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10");
        check("a[01-1]", "a01");
        check("[1-3]", "1", "2", "3");
        check("10.213.0.[1-3]", "10.213.0.1", "10.213.0.2", "10.213.0.3");
        check("gpu[7]", "gpu7");
    }

    @Test
    void commasInsideBracketsDoNotSplitEntries() {
        check("node[1,3],gpu[2-3],login", "node1", "node3", "gpu2", "gpu3", "login");
    }

    @Test
    void severalBracketsInSlurmsOrder() {
        check("a[1-2]-b[3-4]", "a1-b3", "a1-b4", "a2-b3", "a2-b4");
        check("a[1,3-4]b[5]", "a1b5", "a3b5", "a4b5");
        // Slurm's order (hostlist.c, checked against scontrol below): second-to-last bracket slowest, the last fastest.
        check("r[1-2]s[1-2]n[0-1]", "r1s1n0", "r1s1n1", "r2s1n0", "r2s1n1", "r1s2n0", "r1s2n1", "r2s2n0", "r2s2n1");
        check("a[1-2]b[3-4]c[5-6]d[7-8]", expandedBySlurm4());
    }

    /** a[1-2]b[3-4]c[5-6]d[7-8] as Slurm orders it: c slowest, then b, then a, then d. */
    private static String[] expandedBySlurm4() {
        java.util.List<String> out = new java.util.ArrayList<>();
        for (int c = 5; c <= 6; c++) {
            for (int b = 3; b <= 4; b++) {
                for (int a = 1; a <= 2; a++) {
                    for (int d = 7; d <= 8; d++) {
                        out.add("a" + a + "b" + b + "c" + c + "d" + d);
                    }
                }
            }
        }
        return out.toArray(String[]::new);
    }

    @Test
    void textAfterTheLastBracket() {
        check("n[01-02]-ib", "n01-ib", "n02-ib");
        check("rack[1-2]_n[08-09]x", "rack1_n08x", "rack1_n09x", "rack2_n08x", "rack2_n09x");
    }

    @Test
    void duplicatesAreKeptInOrder() {
        check("a[1-2,1],a1", "a1", "a2", "a1", "a1");
    }

    @Test
    void malformedListsAreErrorsNamingTheEntry() {
        assertTrue(error("a[1-3").contains("entry 'a[1-3' has a '[' without its ']'"), error("a[1-3"));
        assertTrue(error("ok,a[3-1]").contains("entry 'a[3-1]' has the range '3-1' whose start is above its end"));
        assertTrue(error("a[]").contains("empty bracket"));
        assertTrue(error("a[1x2]").contains("'1x2'"));
        assertTrue(error("a[+1]").contains("unsigned decimal"));
        assertTrue(error("a[ 1-2]").contains("unsigned decimal"));
        assertTrue(error("a[-1]").contains("unsigned decimal"));
        assertTrue(error("a[1--2]").contains("unsigned decimal"));
        assertTrue(error("h[0-1]-[a]").contains("'a'"));
        assertTrue(error("a[1b[2-3]").contains("'[' without its ']'"));
        assertTrue(error("a[1]]").contains("']' without its '['"));
        assertTrue(error("a]1[").contains("']' without its '['"));
        assertTrue(error("a[0-65536]").contains("more than 65536 hosts"));
        assertTrue(error("a[99999999999999999999]").contains("too large"));
        assertTrue(error("a{1-2}").contains("slurmctld"));
        assertTrue(error("a[0-65535]b[0-65535]").contains("more than " + Hostlist.MAX_HOSTS));
    }

    @Test
    void firstHost() {
        assertEquals("node01", Hostlist.first("node[01-04,07]"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> Hostlist.first(" , ")).getMessage().contains("names no host"));
    }

    /**
     * The same lists expanded by Slurm itself ({@code scontrol show hostnames}, which expands
     * locally given any slurm.conf). Only lists that every Slurm version accepts: text after the
     * last bracket is accepted from 23.02 on, and Debian 12's is 22.05.
     */
    @Test
    void agreesWithSlurmsScontrol() throws Exception {
        Path scontrol = Path.of("/usr/bin/scontrol");
        assumeTrue(Files.isExecutable(scontrol), "scontrol not found (Debian package slurm-client)");
        Path dir = Files.createTempDirectory("jccl-hostlist");
        try {
            Path conf = dir.resolve("slurm.conf");
            Files.writeString(conf, "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1 State=UNKNOWN\n"
                    + "PartitionName=p Nodes=localhost Default=YES\n");
            String[] lists = {"vm", "node[01-04,07]", "n[8-10]", "n[008-10],m", "a[1-010]", "[1-3]", "10.213.0.[1-3]",
                "a[1-2]-b[3-4]", "a[1,3-4]b[5]", "r[1-2]s[1-2]n[0-1]", "a[1-2]b[3-4]c[5-6]d[7-8]", "a,,b  c", "node[1,3],gpu[2-3],login", "a[1-2,1],a1"};
            for (String list : lists) {
                ProcessBuilder pb = new ProcessBuilder(scontrol.toString(), "show", "hostnames", list);
                pb.environment().put("SLURM_CONF", conf.toString());
                pb.redirectErrorStream(true);
                Process p = pb.start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertTrue(p.waitFor(20, TimeUnit.SECONDS), "scontrol hung");
                assertEquals(0, p.exitValue(), "scontrol show hostnames " + list + ": " + out);
                assertEquals(out.lines().toList(), Hostlist.expand(list), "Slurm expands '" + list + "' as " + out);
            }
        } finally {
            try (var files = Files.list(dir)) {
                for (Path f : files.toList()) {
                    Files.deleteIfExists(f);
                }
            } catch (IOException e) {
                // a temporary file left behind changes no verdict
            }
            Files.deleteIfExists(dir);
        }
    }
}
