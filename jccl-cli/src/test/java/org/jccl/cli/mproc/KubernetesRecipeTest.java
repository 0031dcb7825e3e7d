package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Kubernetes recipe (docs/deploy/jccl-job.yaml) as far as this machine can run it: the manifest
 * parses (python3's yaml) and has what the recipe promises (headless Service publishing not-ready
 * pods, Indexed Job, /dev/shm as a Memory emptyDir, IPC_LOCK, one GPU, rank from the completion
 * index, JCCL_COMM_ID naming pod 0 through the Service); then the environment Kubernetes would give
 * each pod, exactly as the manifest says, forms the job between two "pods": network namespaces
 * with the pods' host names and the /etc/hosts kubelet writes. Pod 0's DNS name appears in pod 1's
 * resolution only after pod 1 started (as a headless Service publishes a pod once it runs), so pod 1
 * must wait for the name. Skipped without python3 + yaml, root or iproute2.
 */
class KubernetesRecipeTest {

    @TempDir
    Path dir;

    private static Path manifest() {
        for (Path p = Path.of(System.getProperty("user.dir")).toAbsolutePath(); p != null; p = p.getParent()) {
            Path m = p.resolve("docs/deploy/jccl-job.yaml");
            if (Files.isRegularFile(m)) {
                return m;
            }
        }
        throw new AssertionError("docs/deploy/jccl-job.yaml not found above " + System.getProperty("user.dir"));
    }

    private static boolean pythonWithYaml() throws Exception {
        if (!Files.isExecutable(Path.of("/usr/bin/python3"))) {
            return false;
        }
        Process p = new ProcessBuilder("/usr/bin/python3", "-c", "import yaml").redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
    }

    /** The manifest's environment for pod {@code index}, checked by k8s_manifest.py. */
    private Map<String, String> podEnv(int index, String token) throws Exception {
        Path script = dir.resolve("k8s_manifest.py");
        if (!Files.exists(script)) {
            try (var in = KubernetesRecipeTest.class.getResourceAsStream("/deploy/k8s_manifest.py")) {
                Files.write(script, in.readAllBytes());
            }
        }
        Process p = new ProcessBuilder("/usr/bin/python3", script.toString(), manifest().toString(), Integer.toString(index), token)
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.strip().endsWith("MANIFEST OK"), out);
        Map<String, String> env = new LinkedHashMap<>();
        for (String line : out.lines().toList()) {
            if (line.startsWith("ENV ")) {
                int eq = line.indexOf('=');
                env.put(line.substring(4, eq), line.substring(eq + 1));
            }
        }
        return env;
    }

    private static String kubeletHosts(int i) {
        return NetNamespaces.address(i) + " jccl-job-" + i + ".jccl-job.default.svc.cluster.local jccl-job-" + i;
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void theManifestsEnvironmentFormsTheJobBetweenTwoPods() throws Exception {
        assumeTrue(pythonWithYaml(), "python3 with yaml is missing (Debian: apt-get install python3-yaml)");
        String token = Processes.newToken();
        Map<String, String> pod0 = podEnv(0, token);
        Map<String, String> pod1 = podEnv(1, token);
        assertEquals("0", pod0.get("JCCL_RANK"));
        assertEquals("1", pod1.get("JCCL_RANK"));
        try (NetNamespaces net = NetNamespaces.create(2); Processes procs = new Processes()) {
            // Pod 0 finds its own Service name (cluster DNS); pod 1 does not, yet: pod 0 is not running.
            net.hosts(0, kubeletHosts(0) + "\n" + NetNamespaces.address(0) + " jccl-job-0.jccl-job");
            net.hosts(1, kubeletHosts(1));
            List<String> check = Processes.collectiveCheck("--counts", "0,7,1000", "--types", "float32,int32", "--reduce-ops", "sum,min",
                    "--verbose");
            Map<String, String> env1 = new LinkedHashMap<>(pod1);
            env1.put("JCCL_DEBUG", "INFO");
            env1.put("JCCL_DEBUG_SUBSYS", "BOOTSTRAP");
            procs.start("pod1", net.inHost(1, "jccl-job-1", check), env1);
            Thread.sleep(2_000);
            // Pod 0 starts; the Service now publishes its name.
            procs.start("pod0", net.inHost(0, "jccl-job-0", check), pod0);
            Files.writeString(Path.of("/etc/netns", net.host(1), "hosts"), "127.0.0.1 localhost\n" + kubeletHosts(1) + "\n"
                    + NetNamespaces.address(0) + " jccl-job-0.jccl-job\n");
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(130));
            String out = procs.outputs();
            assertEquals(List.of(0, 0), codes, out);
            Processes.checkOk(out);
            assertTrue(procs.get(0).output().contains("'jccl-job-0.jccl-job' (JCCL_COMM_ID=jccl-job-0.jccl-job:29500) does not resolve"
                    + " yet; retrying"), "pod 1 waited for pod 0's name:\n" + procs.get(0).output());
        }
    }
}
