package org.jccl.internal.bootstrap;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A python3 that can import torch, for the tests that talk to a real TCPStore, and the store itself
 * ({@link Peer}: {@code torch/tcpstore_peer.py} from the test resources). {@link #find()} returns
 * null when there is none; callers skip naming {@link #MISSING}.
 */
public final class TorchPython {

    /** The skip message. */
    public static final String MISSING = "no python3 that can import torch (Debian: apt-get install python3-torch; or set"
            + " JCCL_TEST_PYTHON to one)";

    private static String found;
    private static boolean searched;

    private TorchPython() {
    }

    /** The path of a python3 with torch, or null. */
    public static synchronized String find() {
        if (!searched) {
            searched = true;
            List<String> candidates = new ArrayList<>();
            String env = System.getenv("JCCL_TEST_PYTHON");
            if (env != null && !env.isBlank()) {
                candidates.add(env);
            }
            candidates.add("/usr/bin/python3");
            String path = System.getenv("PATH");
            if (path != null) {
                for (String d : path.split(File.pathSeparator)) {
                    candidates.add(Path.of(d.isEmpty() ? "." : d, "python3").toString());
                }
            }
            for (String c : candidates) {
                if (Files.isExecutable(Path.of(c)) && importsTorch(c)) {
                    found = c;
                    break;
                }
            }
        }
        return found;
    }

    private static boolean importsTorch(String python) {
        try {
            Process p = new ProcessBuilder(python, "-c", "import torch").redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return false;
            }
            return p.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** A real torch TCPStore server in a python3 process, with a torch client driven line by line. */
    public static final class Peer implements AutoCloseable {
        private final Process process;
        private final BufferedReader out;
        private final PrintWriter in;
        /** The store's port. */
        public final int port;
        /** torch.__version__. */
        public final String version;

        public Peer(String python) throws IOException {
            Path script = Files.createTempFile("tcpstore_peer", ".py");
            try (var s = TorchPython.class.getResourceAsStream("/torch/tcpstore_peer.py")) {
                if (s == null) {
                    throw new IOException("test resource torch/tcpstore_peer.py is missing");
                }
                Files.write(script, s.readAllBytes());
            }
            script.toFile().deleteOnExit();
            process = new ProcessBuilder(python, script.toString()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            in = new PrintWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8), true);
            String first = out.readLine();
            if (first == null || !first.startsWith("PORT ")) {
                close();
                throw new IOException("the torch store did not start: " + first);
            }
            String[] w = first.split(" ");
            port = Integer.parseInt(w[1]);
            version = w[3];
        }

        /** Sends one command and returns the answer line. */
        public String command(String line) {
            in.println(line);
            try {
                String r = out.readLine();
                if (r == null) {
                    throw new IOException("the torch store process ended");
                }
                return r;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** torch's major.minor as a number: 1.13 -> 113, 2.4 -> 204. */
        public int versionNumber() {
            String[] p = version.split("[.+a-z]");
            return Integer.parseInt(p[0]) * 100 + Integer.parseInt(p[1]);
        }

        @Override
        public void close() {
            in.println("quit");
            in.close();
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }
}
