package org.jccl.ucx.internal;

import java.util.List;
import java.util.Map;
import org.jccl.ucx.Ucx;

/** What {@link Ucx#status()} reports: the gate's outcome and the resources of a throw-away context and worker. */
public final class UcxProbe {
    private UcxProbe() {
    }

    public static Ucx.Status status() {
        UcxLibrary.Loaded l = UcxLibrary.get();
        if (!l.available()) {
            return new Ucx.Status(false, null, null, l.reason(), List.of(), false, l.notes());
        }
        try (UcxWorker w = UcxWorker.open(l.ucp(), Map.of(), "jccl-probe", true)) {
            return new Ucx.Status(true, l.ucp().version(), l.ucp().libraryPath, null, w.resources, w.cudaMemory(), l.notes());
        } catch (RuntimeException e) {
            return new Ucx.Status(false, l.ucp().version(), l.ucp().libraryPath, "UCX " + l.ucp().version()
                    + " loaded, but a context and worker could not be made: " + e.getMessage(), List.of(), false, l.notes());
        }
    }
}
