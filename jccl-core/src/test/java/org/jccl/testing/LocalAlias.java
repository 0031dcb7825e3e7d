package org.jccl.testing;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.Config;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.TransportContext;

/**
 * For test transports that carry their messages over LocalTransport's endpoint opened under their own
 * name: {@code ctx} with every peer's address of transport {@code name} also under the name LOCAL (what
 * LocalTransport's endpoint looks up), and the wakeup a peer's send calls replaced by {@code onWakeup}
 * ({@code ctx::wakeup} to keep the runtime's own).
 */
public record LocalAlias(String name, TransportContext ctx, Runnable onWakeup) implements TransportContext {
    @Override
    public byte[] commId() {
        return ctx.commId();
    }

    @Override
    public int rank() {
        return ctx.rank();
    }

    @Override
    public int size() {
        return ctx.size();
    }

    @Override
    public byte[] secret() {
        return ctx.secret();
    }

    @Override
    public Config config() {
        return ctx.config();
    }

    @Override
    public PeerInfo peer(int rank) {
        PeerInfo p = ctx.peer(rank);
        if (p == null || !p.addresses().containsKey(name)) {
            return p;
        }
        Map<String, byte[]> a = new HashMap<>(p.addresses());
        a.put("LOCAL", p.addresses().get(name));
        return new PeerInfo(p.rank(), p.host(), p.pid(), p.hostHash(), p.processId(), a);
    }

    @Override
    public boolean isStopping() {
        return ctx.isStopping();
    }

    @Override
    public void wakeup() {
        onWakeup.run();
    }

    @Override
    public void stillWaiting() {
        ctx.stillWaiting();
    }

    @Override
    public int localRank() {
        return ctx.localRank();
    }

    @Override
    public int localSize() {
        return ctx.localSize();
    }

    @Override
    public String gpu() {
        return ctx.gpu();
    }

    @Override
    public List<String> nics() {
        return ctx.nics();
    }
}
