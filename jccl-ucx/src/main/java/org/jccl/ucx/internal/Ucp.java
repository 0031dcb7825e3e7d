package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The calls of libucp/libucs (and the few of libc) the transport makes, as FFM downcalls. Made only by
 * {@link UcxLibrary}, the gate, after the library was found, the signal and locale hazards handled and the
 * version checked. Pointers that cross on the hot path (endpoints, buffers, parameter structs, requests) are
 * passed as {@code long}s, which the x86-64 and AArch64 calling conventions pass exactly as pointers (the
 * gate refuses other platforms), so that a send allocates nothing. Every {@code ucs_status_t} return is a
 * {@code JAVA_BYTE} ({@link Status}).
 *
 * <p>Threading: UCX objects are not thread-safe; the transport serialises every call on one worker.
 */
final class Ucp {
    private static final Linker LINKER = Linker.nativeLinker();

    private final SymbolLookup ucp;
    final int major;
    final int minor;
    final int release;
    final String versionString;
    final String libraryPath;

    // configuration and context
    private final MethodHandle configRead;
    private final MethodHandle configModify;
    private final MethodHandle configRelease;
    private final MethodHandle configPrint;
    private final MethodHandle initVersion;
    private final MethodHandle cleanup;
    private final MethodHandle contextQuery;
    private final MethodHandle contextPrintInfo;
    // worker
    private final MethodHandle workerCreate;
    private final MethodHandle workerDestroy;
    private final MethodHandle workerGetAddress;
    private final MethodHandle workerReleaseAddress;
    private final MethodHandle workerProgress;
    private final MethodHandle workerGetEfd;
    private final MethodHandle workerArm;
    private final MethodHandle workerSignal;
    // endpoints
    private final MethodHandle epCreate;
    private final MethodHandle epCloseNbx;
    private final MethodHandle epFlushNbx;
    // two-sided
    private final MethodHandle tagSendNbx;
    private final MethodHandle tagRecvNbx;
    // requests
    private final MethodHandle requestCheckStatus;
    private final MethodHandle tagRecvRequestTest;
    private final MethodHandle requestCancel;
    private final MethodHandle requestFree;
    // one-sided
    private final MethodHandle memMap;
    private final MethodHandle memUnmap;
    private final MethodHandle rkeyPack;
    private final MethodHandle rkeyBufferRelease;
    private final MethodHandle epRkeyUnpack;
    private final MethodHandle rkeyDestroy;
    private final MethodHandle putNbx;
    // libc
    private final MethodHandle openMemstream;
    private final MethodHandle fclose;
    private final MethodHandle free;

    Ucp(SymbolLookup ucp, int major, int minor, int release, String versionString, String libraryPath) {
        this.ucp = ucp;
        this.major = major;
        this.minor = minor;
        this.release = release;
        this.versionString = versionString;
        this.libraryPath = libraryPath;
        configRead = h("ucp_config_read", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, ADDRESS, ADDRESS));
        configModify = h("ucp_config_modify", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, ADDRESS, ADDRESS));
        configRelease = h("ucp_config_release", FunctionDescriptor.ofVoid(ADDRESS));
        configPrint = h("ucp_config_print", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, ADDRESS, JAVA_INT));
        initVersion = h("ucp_init_version", FunctionDescriptor.of(JAVA_BYTE, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        cleanup = h("ucp_cleanup", FunctionDescriptor.ofVoid(ADDRESS));
        contextQuery = h("ucp_context_query", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, ADDRESS));
        contextPrintInfo = h("ucp_context_print_info", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS));
        workerCreate = h("ucp_worker_create", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, ADDRESS, ADDRESS));
        workerDestroy = h("ucp_worker_destroy", FunctionDescriptor.ofVoid(JAVA_LONG));
        workerGetAddress = h("ucp_worker_get_address", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG, ADDRESS, ADDRESS));
        workerReleaseAddress = h("ucp_worker_release_address", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG));
        workerProgress = h("ucp_worker_progress", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
        workerGetEfd = h("ucp_worker_get_efd", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG, ADDRESS));
        workerArm = h("ucp_worker_arm", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG));
        workerSignal = h("ucp_worker_signal", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG));
        epCreate = h("ucp_ep_create", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG, ADDRESS, ADDRESS));
        epCloseNbx = h("ucp_ep_close_nbx", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG));
        epFlushNbx = h("ucp_ep_flush_nbx", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG));
        tagSendNbx = h("ucp_tag_send_nbx", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        tagRecvNbx = h("ucp_tag_recv_nbx", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        // Critical (no thread-state transition): short, never block, never call back into Java; called for every
        // request in flight on each progress pass.
        requestCheckStatus = h("ucp_request_check_status", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG), Linker.Option.critical(false));
        tagRecvRequestTest = h("ucp_tag_recv_request_test", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG, JAVA_LONG),
                Linker.Option.critical(false));
        requestCancel = h("ucp_request_cancel", FunctionDescriptor.ofVoid(JAVA_LONG, JAVA_LONG));
        requestFree = h("ucp_request_free", FunctionDescriptor.ofVoid(JAVA_LONG), Linker.Option.critical(false));
        memMap = h("ucp_mem_map", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, ADDRESS, ADDRESS));
        memUnmap = h("ucp_mem_unmap", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, JAVA_LONG));
        rkeyPack = h("ucp_rkey_pack", FunctionDescriptor.of(JAVA_BYTE, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS));
        rkeyBufferRelease = h("ucp_rkey_buffer_release", FunctionDescriptor.ofVoid(JAVA_LONG));
        epRkeyUnpack = h("ucp_ep_rkey_unpack", FunctionDescriptor.of(JAVA_BYTE, JAVA_LONG, ADDRESS, ADDRESS));
        rkeyDestroy = h("ucp_rkey_destroy", FunctionDescriptor.ofVoid(JAVA_LONG));
        putNbx = h("ucp_put_nbx", FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        SymbolLookup libc = LINKER.defaultLookup();
        openMemstream = LINKER.downcallHandle(libc.find("open_memstream").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
        fclose = LINKER.downcallHandle(libc.find("fclose").orElseThrow(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
        free = LINKER.downcallHandle(libc.find("free").orElseThrow(), FunctionDescriptor.ofVoid(ADDRESS));
    }

    private MethodHandle h(String name, FunctionDescriptor fd, Linker.Option... options) {
        MemorySegment sym = ucp.find(name).orElseThrow(() -> new UnsatisfiedLinkError(name + " is missing from " + libraryPath
                + ": this UCX is not a complete 1.13+ libucp"));
        return LINKER.downcallHandle(sym, fd, options);
    }

    /** Whether an optional (newer than 1.13) symbol exists in this library, looked up when asked. */
    boolean has(String symbol) {
        return ucp.find(symbol).isPresent();
    }

    /** "1.13.1". */
    String version() {
        return major + "." + minor + "." + release;
    }

    // ------------------------------------------------------------------------------------------------ calls

    static UcxException rethrow(String call, Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new UcxException(call + " failed: " + t, Status.ERR_IO_ERROR);
    }

    static void check(String call, byte status) {
        if (status != Status.OK) {
            throw new UcxException(call + " returned " + Status.name(status), status);
        }
    }

    /** {@code ucp_config_read(NULL, NULL, &config)}: UCX_* variables of the environment applied. */
    MemorySegment configRead(Arena arena) {
        MemorySegment out = arena.allocate(ADDRESS);
        byte s;
        try {
            s = (byte) configRead.invokeExact(MemorySegment.NULL, MemorySegment.NULL, out);
        } catch (Throwable t) {
            throw rethrow("ucp_config_read", t);
        }
        check("ucp_config_read", s);
        return out.get(ADDRESS, 0);
    }

    /** {@code ucp_config_modify(config, name, value)}: name without the UCX_ prefix. */
    byte configModify(MemorySegment config, String name, String value) {
        try (Arena a = Arena.ofConfined()) {
            return (byte) configModify.invokeExact(config, a.allocateFrom(name), a.allocateFrom(value));
        } catch (Throwable t) {
            throw rethrow("ucp_config_modify", t);
        }
    }

    void configRelease(MemorySegment config) {
        try {
            configRelease.invokeExact(config);
        } catch (Throwable t) {
            throw rethrow("ucp_config_release", t);
        }
    }

    /**
     * The configuration as {@code ucp_config_print} writes it (UCS_CONFIG_PRINT_CONFIG): {@code UCX_TLS=tcp}
     * lines for the context's own table and {@code NAME=value} lines for the settings it holds for the
     * transports' tables, by name.
     */
    Map<String, String> configPrint(MemorySegment config) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment bufp = a.allocate(ADDRESS);
            MemorySegment sizep = a.allocate(JAVA_LONG);
            MemorySegment file = (MemorySegment) openMemstream.invokeExact(bufp, sizep);
            if (file.address() == 0) {
                throw new UcxException("open_memstream failed", Status.ERR_NO_MEMORY);
            }
            configPrint.invokeExact(config, file, a.allocateFrom("jccl"), Layouts.UCS_CONFIG_PRINT_CONFIG);
            int r = (int) fclose.invokeExact(file);
            MemorySegment buf = bufp.get(ADDRESS, 0);
            long size = sizep.get(JAVA_LONG, 0);
            String text = new String(buf.reinterpret(size).toArray(JAVA_BYTE), StandardCharsets.UTF_8);
            free.invokeExact(buf);
            Map<String, String> out = new LinkedHashMap<>();
            for (String line : text.split("\n")) {
                int eq = line.indexOf('=');
                if (!line.startsWith("#") && eq > 0) {
                    out.put(line.substring(0, eq).trim(), line.substring(eq + 1).trim());
                }
            }
            return out;
        } catch (Throwable t) {
            throw rethrow("ucp_config_print", t);
        }
    }

    /** What {@code ucp_context_print_info} writes: the components, memory domains and resources ("tcp/eth0"). */
    String contextInfo(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment bufp = a.allocate(ADDRESS);
            MemorySegment sizep = a.allocate(JAVA_LONG);
            MemorySegment file = (MemorySegment) openMemstream.invokeExact(bufp, sizep);
            if (file.address() == 0) {
                throw new UcxException("open_memstream failed", Status.ERR_NO_MEMORY);
            }
            contextPrintInfo.invokeExact(context, file);
            int r = (int) fclose.invokeExact(file);
            MemorySegment buf = bufp.get(ADDRESS, 0);
            String text = new String(buf.reinterpret(sizep.get(JAVA_LONG, 0)).toArray(JAVA_BYTE), StandardCharsets.UTF_8);
            free.invokeExact(buf);
            return text;
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_context_print_info", t);
        }
    }

    /** {@code ucp_init_version(1, 13, params, config, &context)}. */
    MemorySegment init(MemorySegment params, MemorySegment config, Arena arena) {
        MemorySegment out = arena.allocate(ADDRESS);
        byte s;
        try {
            s = (byte) initVersion.invokeExact(1, 13, params, config, out);
        } catch (Throwable t) {
            throw rethrow("ucp_init_version", t);
        }
        check("ucp_init_version(1, 13)", s);
        return out.get(ADDRESS, 0);
    }

    void cleanup(MemorySegment context) {
        try {
            cleanup.invokeExact(context);
        } catch (Throwable t) {
            throw rethrow("ucp_cleanup", t);
        }
    }

    /** The context's memory types bitmap (bit 0 host, bit 1 CUDA): {@code ucp_context_query} with MEMORY_TYPES. */
    long memoryTypes(MemorySegment context) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment attr = a.allocate(Layouts.STRUCT_BYTES, 8);
            attr.set(JAVA_LONG, Layouts.CTX_ATTR_FIELD_MASK, Layouts.UCP_ATTR_FIELD_MEMORY_TYPES);
            check("ucp_context_query", (byte) contextQuery.invokeExact(context, attr));
            return attr.get(JAVA_LONG, Layouts.CTX_ATTR_MEMORY_TYPES);
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_context_query", t);
        }
    }

    long workerCreate(MemorySegment context, MemorySegment params) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            byte s = (byte) workerCreate.invokeExact(context, params, out);
            check("ucp_worker_create", s);
            return out.get(JAVA_LONG, 0);
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_worker_create", t);
        }
    }

    void workerDestroy(long worker) {
        try {
            workerDestroy.invokeExact(worker);
        } catch (Throwable t) {
            throw rethrow("ucp_worker_destroy", t);
        }
    }

    /** The worker's address bytes (copied; the UCX buffer is released). */
    byte[] workerAddress(long worker) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment addrp = a.allocate(ADDRESS);
            MemorySegment lenp = a.allocate(JAVA_LONG);
            byte s = (byte) workerGetAddress.invokeExact(worker, addrp, lenp);
            check("ucp_worker_get_address", s);
            long addr = addrp.get(JAVA_LONG, 0);
            long len = lenp.get(JAVA_LONG, 0);
            byte[] bytes = MemorySegment.ofAddress(addr).reinterpret(len).toArray(JAVA_BYTE);
            workerReleaseAddress.invokeExact(worker, addr);
            return bytes;
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_worker_get_address", t);
        }
    }

    int progress(long worker) {
        try {
            return (int) workerProgress.invokeExact(worker);
        } catch (Throwable t) {
            throw rethrow("ucp_worker_progress", t);
        }
    }

    int efd(long worker) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment fd = a.allocate(JAVA_INT);
            check("ucp_worker_get_efd", (byte) workerGetEfd.invokeExact(worker, fd));
            return fd.get(JAVA_INT, 0);
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_worker_get_efd", t);
        }
    }

    /** {@code ucp_worker_arm}: UCS_OK (armed) or UCS_ERR_BUSY (progress first) or an error. */
    byte arm(long worker) {
        try {
            return (byte) workerArm.invokeExact(worker);
        } catch (Throwable t) {
            throw rethrow("ucp_worker_arm", t);
        }
    }

    byte signal(long worker) {
        try {
            return (byte) workerSignal.invokeExact(worker);
        } catch (Throwable t) {
            throw rethrow("ucp_worker_signal", t);
        }
    }

    /** {@code ucp_ep_create}: the status, and the endpoint in {@code out}. */
    byte epCreate(long worker, MemorySegment params, MemorySegment out) {
        try {
            return (byte) epCreate.invokeExact(worker, params, out);
        } catch (Throwable t) {
            throw rethrow("ucp_ep_create", t);
        }
    }

    long epClose(long ep, long params) {
        try {
            return (long) epCloseNbx.invokeExact(ep, params);
        } catch (Throwable t) {
            throw rethrow("ucp_ep_close_nbx", t);
        }
    }

    long epFlush(long ep, long params) {
        try {
            return (long) epFlushNbx.invokeExact(ep, params);
        } catch (Throwable t) {
            throw rethrow("ucp_ep_flush_nbx", t);
        }
    }

    long tagSend(long ep, long buffer, long length, long tag, long params) {
        try {
            return (long) tagSendNbx.invokeExact(ep, buffer, length, tag, params);
        } catch (Throwable t) {
            throw rethrow("ucp_tag_send_nbx", t);
        }
    }

    long tagRecv(long worker, long buffer, long length, long tag, long mask, long params) {
        try {
            return (long) tagRecvNbx.invokeExact(worker, buffer, length, tag, mask, params);
        } catch (Throwable t) {
            throw rethrow("ucp_tag_recv_nbx", t);
        }
    }

    byte checkStatus(long request) {
        try {
            return (byte) requestCheckStatus.invokeExact(request);
        } catch (Throwable t) {
            throw rethrow("ucp_request_check_status", t);
        }
    }

    /** {@code ucp_tag_recv_request_test(request, info)}: the status; info's length is set when done. */
    byte recvTest(long request, long info) {
        try {
            return (byte) tagRecvRequestTest.invokeExact(request, info);
        } catch (Throwable t) {
            throw rethrow("ucp_tag_recv_request_test", t);
        }
    }

    void cancel(long worker, long request) {
        try {
            requestCancel.invokeExact(worker, request);
        } catch (Throwable t) {
            throw rethrow("ucp_request_cancel", t);
        }
    }

    void free(long request) {
        try {
            requestFree.invokeExact(request);
        } catch (Throwable t) {
            throw rethrow("ucp_request_free", t);
        }
    }

    /** {@code ucp_mem_map}: the memh, or an exception naming the status. */
    long memMap(MemorySegment context, long address, long length, boolean allocate) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(Layouts.STRUCT_BYTES, 8);
            long mask = Layouts.UCP_MEM_MAP_PARAM_FIELD_ADDRESS | Layouts.UCP_MEM_MAP_PARAM_FIELD_LENGTH | Layouts.UCP_MEM_MAP_PARAM_FIELD_FLAGS
                    | Layouts.UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
            p.set(JAVA_LONG, Layouts.MEM_FIELD_MASK, mask);
            p.set(JAVA_LONG, Layouts.MEM_ADDRESS, address);
            p.set(JAVA_LONG, Layouts.MEM_LENGTH, length);
            p.set(JAVA_INT, Layouts.MEM_FLAGS, allocate ? Layouts.UCP_MEM_MAP_ALLOCATE : 0);
            p.set(JAVA_INT, Layouts.MEM_MEMORY_TYPE, Layouts.UCS_MEMORY_TYPE_HOST);
            MemorySegment out = a.allocate(ADDRESS);
            check("ucp_mem_map", (byte) memMap.invokeExact(context, p, out));
            return out.get(JAVA_LONG, 0);
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_mem_map", t);
        }
    }

    void memUnmap(MemorySegment context, long memh) {
        try {
            check("ucp_mem_unmap", (byte) memUnmap.invokeExact(context, memh));
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_mem_unmap", t);
        }
    }

    byte[] rkeyPack(MemorySegment context, long memh) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment bufp = a.allocate(ADDRESS);
            MemorySegment sizep = a.allocate(JAVA_LONG);
            check("ucp_rkey_pack", (byte) rkeyPack.invokeExact(context, memh, bufp, sizep));
            long buf = bufp.get(JAVA_LONG, 0);
            byte[] key = MemorySegment.ofAddress(buf).reinterpret(sizep.get(JAVA_LONG, 0)).toArray(JAVA_BYTE);
            rkeyBufferRelease.invokeExact(buf);
            return key;
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_rkey_pack", t);
        }
    }

    long rkeyUnpack(long ep, byte[] key) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment buf = a.allocate(Math.max(1, key.length));
            MemorySegment.copy(key, 0, buf, JAVA_BYTE, 0, key.length);
            MemorySegment out = a.allocate(ADDRESS);
            check("ucp_ep_rkey_unpack", (byte) epRkeyUnpack.invokeExact(ep, buf, out));
            return out.get(JAVA_LONG, 0);
        } catch (UcxException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow("ucp_ep_rkey_unpack", t);
        }
    }

    void rkeyDestroy(long rkey) {
        try {
            rkeyDestroy.invokeExact(rkey);
        } catch (Throwable t) {
            throw rethrow("ucp_rkey_destroy", t);
        }
    }

    long put(long ep, long buffer, long length, long remoteAddress, long rkey, long params) {
        try {
            return (long) putNbx.invokeExact(ep, buffer, length, remoteAddress, rkey, params);
        } catch (Throwable t) {
            throw rethrow("ucp_put_nbx", t);
        }
    }

    /** An optional symbol, if this library has it (for features newer than 1.13). */
    Optional<MemorySegment> optional(String name) {
        return ucp.find(name);
    }
}
