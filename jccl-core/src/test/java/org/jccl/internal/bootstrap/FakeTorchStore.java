package org.jccl.internal.bootstrap;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal stand-in for the torch 2.x TCPStore servers, which this machine's torch (1.13) cannot
 * start: the validated dialect (VALIDATE first, SET 1, GET 3, CHECK 5, WAIT 6, GETNUMKEYS 7, PING
 * 13 when {@code ping}), with the two backends' treatment of a first query that is not a valid
 * VALIDATE: the classic backend closes the connection, the libuv backend ignores the bytes. An
 * unknown query closes the connection (both backends). A {@code silent} server reads and answers
 * nothing, as a server that expects a prefix before every query would. Written from the protocol,
 * for the dialects' tests only.
 */
final class FakeTorchStore implements AutoCloseable {
    private final ServerSocket server;
    private final boolean ping;
    private final boolean libuv;
    private final boolean silent;
    private final Map<String, byte[]> data = new HashMap<>();
    private final List<Socket> clients = new ArrayList<>();
    private final Thread acceptor;

    FakeTorchStore(boolean ping, boolean libuv, boolean silent) throws IOException {
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        this.ping = ping;
        this.libuv = libuv;
        this.silent = silent;
        this.acceptor = Thread.ofPlatform().daemon().name("fake-torch-store").start(this::accept);
    }

    InetSocketAddress address() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
    }

    synchronized byte[] value(String key) {
        return data.get(key);
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                synchronized (this) {
                    clients.add(s);
                }
                Thread.ofPlatform().daemon().start(() -> serve(s));
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s) {
        try (s) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            if (silent) {
                in.readAllBytes();
                return;
            }
            int first = in.read();
            int magic = first == 0 ? Integer.reverseBytes(in.readInt()) : 0;
            if (first != 0 || magic != TcpStoreClient.VALIDATION_MAGIC) {
                if (libuv) {
                    in.readAllBytes(); // ignored until the client gives up
                }
                return;
            }
            while (true) {
                int q = in.read();
                switch (q) {
                    case 1 -> {
                        String k = string(in);
                        byte[] v = bytes(in);
                        synchronized (this) {
                            data.put(k, v);
                            notifyAll();
                        }
                    }
                    case 3 -> {
                        byte[] v;
                        synchronized (this) {
                            v = data.get(string(in));
                        }
                        if (v == null) {
                            return; // the classic backend's map.at() throws: the connection closes
                        }
                        out.write(le(8).putLong(v.length).array());
                        out.write(v);
                    }
                    case 5, 6 -> {
                        long n = Long.reverseBytes(in.readLong());
                        List<String> keys = new ArrayList<>();
                        for (long i = 0; i < n; i++) {
                            keys.add(string(in));
                        }
                        synchronized (this) {
                            if (q == 6) {
                                while (!keys.stream().allMatch(data::containsKey)) {
                                    wait();
                                }
                                out.write(0);
                            } else {
                                out.write(keys.stream().allMatch(data::containsKey) ? 0 : 1);
                            }
                        }
                    }
                    case 7 -> {
                        synchronized (this) {
                            out.write(le(8).putLong(data.size()).array());
                        }
                    }
                    case 13 -> {
                        if (!ping) {
                            return;
                        }
                        out.write(le(4).putInt(Integer.reverseBytes(in.readInt())).array());
                    }
                    default -> {
                        return;
                    }
                }
                out.flush();
            }
        } catch (IOException | InterruptedException e) {
            // the client went away
        }
    }

    private static ByteBuffer le(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static byte[] bytes(DataInputStream in) throws IOException {
        long n = Long.reverseBytes(in.readLong());
        if (n < 0 || n > 1 << 20) {
            throw new IOException("length " + n);
        }
        byte[] b = new byte[(int) n];
        in.readFully(b);
        return b;
    }

    private static String string(DataInputStream in) throws IOException {
        return new String(bytes(in), StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
        server.close();
        synchronized (this) {
            for (Socket s : clients) {
                s.close();
            }
        }
        try {
            acceptor.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
