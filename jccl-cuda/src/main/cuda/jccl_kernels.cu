// jccl's GPU kernels: collectives between GPUs of one host through peer-mapped memory (NVLink or
// PCIe peer-to-peer). Built into a fatbin (sm_90 machine code + compute_90 PTX) by
// scripts/build-kernels.sh; the result is committed under src/main/resources so machines without
// nvcc build too, and CudaKernelsTest checks that it matches these sources.
//
// Model. Every kernel gets, by value, one argument block (struct Args / P2pArgs below, mirrored
// byte for byte by org.jccl.cuda.internal.KernelArgs) holding the addresses, as mapped in this
// process, of the peers' buffers and of every rank's signal area. Cross-GPU ordering uses
// monotonically increasing 64-bit flags in those signal areas: a rank "arrives" by storing the
// operation's epoch into a peer's slot with release semantics at system scope, and waits until its
// own slots reach the epoch with acquire loads. Waits poll a host-mapped abort word and a deadline
// (%globaltimer), so a dead peer or comm.abort() ends the kernel and is reported through the
// host-mapped status words, never a GPU spinning forever.
//
// Collective kernels (reduce, copy) bracket their work with a start barrier (every rank's kernel
// has started, so its inputs are ready and its outputs free) and an end barrier (every rank has
// finished reading my inputs and writing my outputs). Barriers are per block: all ranks launch
// the same grid for the same operation (the host derives it from the count alone), and block b
// of every rank covers the same elements.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define JCCL_MAX_RANKS 8
#define JCCL_MAX_BLOCKS 256

// Signal area layout (uint64 words), identical in every rank's area.
#define SIG_START 0                                          // [block][src rank]
#define SIG_END (JCCL_MAX_BLOCKS * JCCL_MAX_RANKS)            // [block][src rank]
#define SIG_READY (2 * JCCL_MAX_BLOCKS * JCCL_MAX_RANKS)      // [receiver rank], stored at the sender
#define SIG_DONE (SIG_READY + JCCL_MAX_RANKS)                 // [sender rank], stored at the receiver
#define SIG_COUNTER (SIG_DONE + JCCL_MAX_RANKS)               // local: p2p blocks finished
#define SIG_PIPE 4352                                         // [block]: broadcast rounds, stored by the predecessor (chain-async: [block][parity])
#define SIG_CE 6144                                           // copy-engine pipelines' flags (set and read by jccl_flags only):
                                                              // [6144 + 8 lane + src] arrived (lanes 0-3), [6176 + src] slot
                                                              // freed, [6184 + src] done
#define SIG_RING_ARRIVED 6208                                 // [block]: ring transfers landed here, stored by the predecessor
#define SIG_RING_FREED 6464                                   // [block]: stored by the successor (its kernel runs; slots it emptied)
#define SIG_GUARD 8192                                        // [epoch parity][block][src rank]: the one-shot's mismatch guard
                                                              // words (org.jccl.internal.runtime.OpGuard), stored by the source
#define SIG_WORDS (SIG_GUARD + 2 * JCCL_MAX_BLOCKS * JCCL_MAX_RANKS)  // words of each rank's signal area (96 KiB)

// Args.mode bits
#define MODE_START 1      // start barrier
#define MODE_END 2        // end barrier
#define MODE_VEC 4        // every pointer is 16-byte aligned: use 16-byte accesses
#define MODE_MULTI_DST 8  // copy: one source to ndst destinations (else task t: src[t] -> dst[t])
#define MODE_SPLIT 16     // copy, tasks: the blocks split into nsrc groups, one task each, all tasks at once
#define MODE_CHAIN 32     // bcast: a pipelined chain root -> root+1 -> ... (each GPU stores to one peer)
#define MODE_WARPS 64     // bcast chain: every warp is its own pipeline (own part, own flag), not every block
#define MODE_ROLES 128    // bcast chain: per block, copying warps plus a poller and a signaller warp (no end barrier)

// Status words (host-mapped): [0] error code, [1] epoch, [2] peer waited for, [3] block; for ERR_MISMATCH also
// [4] the peer's guard word and [5] this rank's (the host decodes them: org.jccl.cuda.internal.KernelStatus)
#define ERR_ABORTED 1
#define ERR_TIMEOUT 2
#define ERR_MISMATCH 3

struct Args {
    uint64_t src[JCCL_MAX_RANKS];
    uint64_t dst[JCCL_MAX_RANKS];
    uint64_t signal[JCCL_MAX_RANKS];
    uint64_t abortFlag;
    uint64_t status;
    uint64_t count;      // reduce: elements; copy: bytes per task
    uint64_t epoch;
    uint64_t timeoutNs;
    int32_t nsrc;        // reduce: sources combined in this order; copy: tasks
    int32_t ndst;
    int32_t rank;
    int32_t nranks;
    int32_t mode;
    int32_t divisor;     // AVG: number of ranks
};

// One-shot all-reduce by pushes: every rank stores its input into a slot of every peer's inbox
// (double-buffered by epoch parity), signals, waits for the peers' signals and reduces its own
// inbox. Inputs are read only by their owner and outputs written only by theirs, so no end
// barrier is needed and in-place is safe. Block b of every rank covers the same elements, so
// per-block flags (the START slots) suffice. A peer reuses an inbox slot two operations later,
// only after this rank's kernel for the operation in between has started, i.e. after this
// rank finished reading it.
//
// Mismatch guard: nothing is exchanged on the host, so the kernels compare the calls. Beside each
// flag a rank stores its call's guard word (guard != 0) into the peer's SIG_GUARD slot of the
// epoch's parity (the same lifetime as the inbox slot), first thing in the kernel, before the fence that precedes the flag.
// After the flags, every thread loads the block's guard line (every source's word, one 64-byte
// line) before its inbox data, needed only before its first store; when a peer's word differs from this rank's, no thread
// stores any output (the receive buffer keeps what it held), and thread 0 records the peer and
// both words in the status words for the host (ERR_MISMATCH), which raises the mismatch at the
// next call. Blocks a peer did not launch (its count gave another grid) see the status word in
// their wait and leave. A word of 0 (JCCL_CHECK=none) is neither stored nor compared.
struct OneShotArgs {
    uint64_t in;
    uint64_t out;
    uint64_t peerInbox[JCCL_MAX_RANKS];  // where my data goes at rank q (mapped here); unused for q == rank
    uint64_t myInbox[JCCL_MAX_RANKS];    // where rank q's data arrives here; in for q == rank
    uint64_t signal[JCCL_MAX_RANKS];
    uint64_t abortFlag;
    uint64_t status;
    uint64_t count;
    uint64_t epoch;
    uint64_t timeoutNs;
    int32_t rank;
    int32_t nranks;
    int32_t divisor;
    int32_t vec;
    uint64_t guard;      // this call's mismatch guard word; 0: not compared (JCCL_CHECK=none)
};

// Two-shot all-reduce by stores only: phase 1 stores slice q of my input into rank q's scratch
// slot for me; per-block flags; phase 2 reduces slice r (my input + my scratch slots, in rank
// order) and stores it into my output and every peer's output; end barrier. No start barrier:
// scratch slots are free because the previous operation's end barrier came after every reader,
// and a peer's output is free once its phase-1 flag (set by its running kernel) has arrived.
#define PUSH_VEC 1     // PushArgs.vec bits: 16-byte accesses
#define PUSH_SERIAL 2  // phase 2 stores the reduced slice locally, then to one peer after another
struct PushArgs {
    uint64_t in;
    uint64_t out;
    uint64_t peerScratch[JCCL_MAX_RANKS];  // rank q's scratch slot for my data (mapped here)
    uint64_t myScratch[JCCL_MAX_RANKS];    // my scratch slot for rank q's data
    uint64_t peerOut[JCCL_MAX_RANKS];      // rank q's output (mapped here), at this chunk
    uint64_t signal[JCCL_MAX_RANKS];
    uint64_t abortFlag;
    uint64_t status;
    uint64_t count;      // elements of this chunk
    uint64_t slice;      // elements per slice, a multiple of 16 bytes
    uint64_t epoch;
    uint64_t timeoutNs;
    int32_t rank;
    int32_t nranks;
    int32_t divisor;
    int32_t vec;
};

// Flags of the copy-engine pipelines: a one-block kernel queued between copies on a stream. It
// stores setValue into every setAddr (after a system fence, so the copies queued before it on the
// stream are visible first) and then waits until every *waitAddr >= waitValue, so the work queued
// after it starts only then. A failed communicator (status set) stores nothing: peers waiting for
// it time out or abort instead of reading unfinished data.
struct FlagArgs {
    uint64_t setAddr[JCCL_MAX_RANKS];
    uint64_t waitAddr[JCCL_MAX_RANKS];
    uint64_t waitValue[JCCL_MAX_RANKS];
    uint64_t setValue;
    uint64_t abortFlag;
    uint64_t status;
    uint64_t timeoutNs;
    uint64_t epoch;
    int32_t waitPeer[JCCL_MAX_RANKS];
    int32_t nset;
    int32_t nwait;
};

struct P2pArgs {
    uint64_t sendSrc[JCCL_MAX_RANKS];
    uint64_t sendDst[JCCL_MAX_RANKS];
    uint64_t sendBytes[JCCL_MAX_RANKS];
    uint64_t sendSeq[JCCL_MAX_RANKS];
    uint64_t recvSeq[JCCL_MAX_RANKS];
    uint64_t signal[JCCL_MAX_RANKS];
    uint64_t abortFlag;
    uint64_t status;
    uint64_t timeoutNs;
    uint64_t blocksBase;  // value of the local block counter before this launch
    int32_t sendPeer[JCCL_MAX_RANKS];
    int32_t recvPeer[JCCL_MAX_RANKS];
    int32_t nsend;
    int32_t nrecv;
    int32_t rank;
    int32_t vec;          // every send pointer and size is 16-byte aligned
};

#include <stddef.h>
// The Java mirror (org.jccl.cuda.internal.KernelArgs) names these offsets; keep them in step.
static_assert(offsetof(Args, dst) == 64 && offsetof(Args, signal) == 128 && offsetof(Args, abortFlag) == 192, "Args layout");
static_assert(offsetof(Args, count) == 208 && offsetof(Args, nsrc) == 232 && offsetof(Args, divisor) == 252, "Args layout");
static_assert(sizeof(Args) == 256, "Args size");
static_assert(offsetof(OneShotArgs, signal) == 144 && offsetof(OneShotArgs, count) == 224 && offsetof(OneShotArgs, rank) == 248, "OneShotArgs layout");
static_assert(offsetof(OneShotArgs, guard) == 264 && sizeof(OneShotArgs) == 272, "OneShotArgs size");
static_assert(SIG_RING_FREED + JCCL_MAX_BLOCKS <= SIG_GUARD && SIG_WORDS == 12288, "signal area layout");
static_assert(offsetof(PushArgs, signal) == 208 && offsetof(PushArgs, count) == 288 && offsetof(PushArgs, rank) == 320, "PushArgs layout");
static_assert(sizeof(PushArgs) == 336, "PushArgs size");
static_assert(offsetof(FlagArgs, setValue) == 192 && offsetof(FlagArgs, waitPeer) == 232 && offsetof(FlagArgs, nwait) == 268,
              "FlagArgs layout");
static_assert(sizeof(FlagArgs) == 272, "FlagArgs size");
static_assert(offsetof(P2pArgs, signal) == 320 && offsetof(P2pArgs, blocksBase) == 408, "P2pArgs layout");
static_assert(offsetof(P2pArgs, sendPeer) == 416 && offsetof(P2pArgs, recvPeer) == 448, "P2pArgs layout");
static_assert(offsetof(P2pArgs, nsend) == 480 && offsetof(P2pArgs, vec) == 492 && sizeof(P2pArgs) == 496, "P2pArgs layout");

// ---------------------------------------------------------------------------------------------
// memory-model helpers

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t ld_volatile_sys(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Records the first failure in the host-mapped status words.
__device__ void report(uint64_t status, uint64_t code, uint64_t epoch, int peer) {
    uint64_t* s = (uint64_t*)status;
    if (atomicCAS((unsigned long long*)s, 0ull, (unsigned long long)code) == 0ull) {
        s[1] = epoch;
        s[2] = (uint64_t)peer;
        s[3] = blockIdx.x;
        __threadfence_system();
    }
}

// Records a mismatch found by the one-shot's guard: the peer, its word and this rank's.
__device__ void report_mismatch(uint64_t status, uint64_t epoch, int peer, uint64_t theirs, uint64_t mine) {
    uint64_t* s = (uint64_t*)status;
    if (atomicCAS((unsigned long long*)s, 0ull, (unsigned long long)ERR_MISMATCH) == 0ull) {
        s[1] = epoch;
        s[2] = (uint64_t)peer;
        s[3] = blockIdx.x;
        s[4] = theirs;
        s[5] = mine;
        __threadfence_system();
    }
}

// Checked every 256 polls of a wait: true when the wait must give up (abort() was called, another
// block or kernel already failed, or the deadline passed), with the reason reported.
__device__ __forceinline__ bool wait_gives_up(uint64_t abortFlag, uint64_t status, uint64_t start, uint64_t timeoutNs,
                                              uint64_t epoch, int peer) {
    if (ld_volatile_sys((const uint64_t*)abortFlag) != 0) {
        report(status, ERR_ABORTED, epoch, peer);
        return true;
    }
    if (ld_volatile_sys((const uint64_t*)status) != 0) {
        return true;  // another block or kernel already failed
    }
    if (globaltimer() - start > timeoutNs) {
        report(status, ERR_TIMEOUT, epoch, peer);
        return true;
    }
    return false;
}

// Waits until *flag >= target; false when aborted or past the deadline (already reported).
__device__ bool wait_geq(const uint64_t* flag, uint64_t target, uint64_t abortFlag, uint64_t status,
                         uint64_t timeoutNs, uint64_t epoch, int peer) {
    if (ld_acquire_sys(flag) >= target) {
        return true;
    }
    uint64_t start = globaltimer();
    uint32_t spins = 0;
    while (ld_acquire_sys(flag) < target) {
        if (++spins == 256) {
            spins = 0;
            if (wait_gives_up(abortFlag, status, start, timeoutNs, epoch, peer)) {
                return false;
            }
        }
    }
    return true;
}

// wait_geq for the pipelines that wait once per round in many warps or blocks: polls with relaxed
// (volatile) loads, which leave the SM's L1 alone, and makes one acquire load once the value is there
// (the flag only grows, so that load sees it too and orders the caller's later reads after it).
__device__ bool wait_geq_poll(const uint64_t* flag, uint64_t target, uint64_t abortFlag, uint64_t status, uint64_t timeoutNs,
                              uint64_t epoch, int peer) {
    if (ld_volatile_sys(flag) < target) {
        uint64_t start = globaltimer();
        uint32_t spins = 0;
        while (ld_volatile_sys(flag) < target) {
            if (++spins == 256) {
                spins = 0;
                if (wait_gives_up(abortFlag, status, start, timeoutNs, epoch, peer)) {
                    return false;
                }
            }
        }
    }
    return ld_acquire_sys(flag) >= target;
}

// Per-block barrier among all ranks; every thread gets the outcome. kindBase: SIG_START or SIG_END.
__device__ bool block_barrier(const Args& a, int kindBase, bool fenceFirst) {
    __shared__ int failed;
    if (threadIdx.x == 0) {
        failed = 0;
    }
    __syncthreads();
    if (threadIdx.x < a.nranks) {
        int peer = threadIdx.x;
        if (fenceFirst) {
            __threadfence_system();  // this block's stores to peers land before the flag
        }
        uint64_t* theirs = (uint64_t*)a.signal[peer];
        st_release_sys(theirs + kindBase + blockIdx.x * JCCL_MAX_RANKS + a.rank, a.epoch);
        const uint64_t* mine = (const uint64_t*)a.signal[a.rank];
        if (!wait_geq(mine + kindBase + blockIdx.x * JCCL_MAX_RANKS + peer, a.epoch, a.abortFlag, a.status, a.timeoutNs,
                      a.epoch, peer)) {
            failed = 1;
        }
    }
    __syncthreads();
    const bool ok = failed == 0;
    __syncthreads();  // every thread has read the outcome before a later barrier of this kernel resets it
    return ok;
}

// ---------------------------------------------------------------------------------------------
// element arithmetic: 16-bit floats accumulate in float and round once at the end

template <typename T> struct Acc { typedef T type; };
template <> struct Acc<__half> { typedef float type; };
template <> struct Acc<__nv_bfloat16> { typedef float type; };

template <typename T> __device__ __forceinline__ typename Acc<T>::type widen(T x) { return x; }
template <> __device__ __forceinline__ float widen<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float widen<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T narrow(typename Acc<T>::type x) { return (T)x; }
template <> __device__ __forceinline__ __half narrow<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

#define OP_SUM 0
#define OP_PROD 1
#define OP_MIN 2
#define OP_MAX 3
#define OP_AVG 4

template <int OP, typename A> __device__ __forceinline__ A combine(A x, A y) {
    if (OP == OP_SUM || OP == OP_AVG) return (A)(x + y);
    if (OP == OP_PROD) return (A)(x * y);
    if (OP == OP_MIN) return y < x ? y : x;
    return y > x ? y : x;
}

template <int OP, typename A> __device__ __forceinline__ A finish(A x, int divisor) {
    if (OP == OP_AVG) return (A)(x / (A)divisor);
    return x;
}

// ---------------------------------------------------------------------------------------------
// reduce: dst[d][i] = src[0][i] op src[1][i] op ... for i < count, for every d < ndst

// Combines the 16-byte vectors x[0..nsrc) element by element, in that order, and rounds once.
template <typename T, int OP> __device__ __forceinline__ uint4 combine_vec(const uint4 (&x)[JCCL_MAX_RANKS], int nsrc, int divisor) {
    typedef typename Acc<T>::type A;
    constexpr int N = 16 / sizeof(T);
    A acc[N];
    const T* e0 = (const T*)&x[0];
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] = widen<T>(e0[i]);
#pragma unroll
    for (int s = 1; s < JCCL_MAX_RANKS; s++) {
        if (s < nsrc) {
            const T* e = (const T*)&x[s];
#pragma unroll
            for (int i = 0; i < N; i++) acc[i] = combine<OP, A>(acc[i], widen<T>(e[i]));
        }
    }
    uint4 out;
    T* o = (T*)&out;
#pragma unroll
    for (int i = 0; i < N; i++) o[i] = narrow<T>(finish<OP, A>(acc[i], divisor));
    return out;
}

template <typename T, int OP> __device__ __forceinline__ void reduce_body(const Args& a) {
    typedef typename Acc<T>::type A;
    constexpr int N = 16 / sizeof(T);
    if ((a.mode & MODE_START) && !block_barrier(a, SIG_START, false)) {
        return;
    }
    const uint64_t count = a.count;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const int nsrc = a.nsrc;
    const int ndst = a.ndst;
    uint64_t nvec = (a.mode & MODE_VEC) ? count / N : 0;
    for (uint64_t v = tid; v < nvec; v += stride) {
        uint4 x[JCCL_MAX_RANKS];
#pragma unroll
        for (int s = 0; s < JCCL_MAX_RANKS; s++) {
            if (s < nsrc) x[s] = ((const uint4*)a.src[s])[v];
        }
        uint4 out = combine_vec<T, OP>(x, nsrc, a.divisor);
#pragma unroll
        for (int d = 0; d < JCCL_MAX_RANKS; d++) {
            if (d < ndst) ((uint4*)a.dst[d])[v] = out;
        }
    }
    for (uint64_t i = nvec * N + tid; i < count; i += stride) {
        A acc = widen<T>(((const T*)a.src[0])[i]);
        for (int s = 1; s < nsrc; s++) acc = combine<OP, A>(acc, widen<T>(((const T*)a.src[s])[i]));
        T r = narrow<T>(finish<OP, A>(acc, a.divisor));
        for (int d = 0; d < ndst; d++) ((T*)a.dst[d])[i] = r;
    }
    if (a.mode & MODE_END) {
        block_barrier(a, SIG_END, true);
    }
}

template <typename T, int OP> __device__ __forceinline__ void oneshot_body(const OneShotArgs& a) {
    typedef typename Acc<T>::type A;
    constexpr int N = 16 / sizeof(T);
    __shared__ int failed;
    const uint64_t count = a.count;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const int n = a.nranks;
    const uint64_t nvec = a.vec ? count / N : 0;
    if (threadIdx.x == 0) failed = 0;
    // 0. my guard word into every peer's guard line, first: a remote store issued here is acknowledged while the pushes
    // below run, so the fence before the flag does not wait a fresh NVLink round trip for it (stored right before the
    // fence it cost ~0.5 us of a 6 us one-shot on 4x H200). Same lifetime as the inbox slot of this epoch's parity.
    const uint64_t guard = a.guard;
    const uint64_t guardLine = SIG_GUARD + ((a.epoch & 1) * JCCL_MAX_BLOCKS + blockIdx.x) * JCCL_MAX_RANKS;
    if (guard != 0 && threadIdx.x < n && threadIdx.x != a.rank) ((uint64_t*)a.signal[threadIdx.x])[guardLine + a.rank] = guard;
    // 1. push my input into every peer's inbox
    for (uint64_t v = tid; v < nvec; v += stride) {
        uint4 x = ((const uint4*)a.in)[v];
#pragma unroll
        for (int q = 0; q < JCCL_MAX_RANKS; q++) {
            if (q < n && q != a.rank) ((uint4*)a.peerInbox[q])[v] = x;
        }
    }
    for (uint64_t i = nvec * N + tid; i < count; i += stride) {
        T x = ((const T*)a.in)[i];
        for (int q = 0; q < n; q++) {
            if (q != a.rank) ((T*)a.peerInbox[q])[i] = x;
        }
    }
    __syncthreads();
    // 2. signal every peer (my guard word and pushes ordered before the flag by the same fence), wait for every peer
    if (threadIdx.x < n && threadIdx.x != a.rank) {
        int q = threadIdx.x;
        __threadfence_system();
        st_release_sys((uint64_t*)a.signal[q] + SIG_START + blockIdx.x * JCCL_MAX_RANKS + a.rank, a.epoch);
        const uint64_t* mine = (const uint64_t*)a.signal[a.rank];
        if (!wait_geq(mine + SIG_START + blockIdx.x * JCCL_MAX_RANKS + q, a.epoch, a.abortFlag, a.status, a.timeoutNs, a.epoch, q)) {
            failed = 1;
        }
    }
    __syncthreads();
    if (failed) return;
    // 3. the peers' guard words (read like the inbox data: after the flags' acquire and the block barrier; needed only
    // before the first store, so their loads may overlap the first inbox loads), then reduce my inbox (rank order)
    // into my output, unless a peer called something else
    // (The whole line, four 16-byte loads without branches: my own column and those of absent ranks are never
    // written, so they hold 0, which matches anything.)
    // The line's loads are issued here; the compare that waits for them runs after the first inbox loads of this
    // thread are issued too (a warp issues in order and stalls at the first use of a pending load: comparing before
    // the inbox loop put a whole memory latency, ~0.4 us, on the one-shot's path).
    int other = -1;  // the first peer whose call differs from mine
    uint64_t theirs = 0;
    bool compared = guard == 0;
    ulonglong2 w[JCCL_MAX_RANKS / 2];
    if (guard != 0) {
        const ulonglong2* line = (const ulonglong2*)((const uint64_t*)a.signal[a.rank] + guardLine);
#pragma unroll
        for (int k = 0; k < JCCL_MAX_RANKS / 2; k++) w[k] = line[k];
    }
#define JCCL_ONESHOT_COMPARE()                                                   \
    if (!compared) {                                                             \
        compared = true;                                                         \
        _Pragma("unroll") for (int s = JCCL_MAX_RANKS - 1; s >= 0; s--) {        \
            const uint64_t g = (s & 1) ? w[s / 2].y : w[s / 2].x;                \
            const bool differs = g != 0 && g != guard;                           \
            other = differs ? s : other;                                         \
            theirs = differs ? g : theirs;                                       \
        }                                                                        \
    }
    for (uint64_t v = tid; v < nvec; v += stride) {
        uint4 x[JCCL_MAX_RANKS];
#pragma unroll
        for (int s = 0; s < JCCL_MAX_RANKS; s++) {
            if (s < n) x[s] = ((const uint4*)a.myInbox[s])[v];
        }
        JCCL_ONESHOT_COMPARE()
        if (other >= 0) break;
        ((uint4*)a.out)[v] = combine_vec<T, OP>(x, n, a.divisor);
    }
    for (uint64_t i = nvec * N + tid; i < count; i += stride) {
        A acc = widen<T>(((const T*)a.myInbox[0])[i]);
        for (int s = 1; s < n; s++) acc = combine<OP, A>(acc, widen<T>(((const T*)a.myInbox[s])[i]));
        JCCL_ONESHOT_COMPARE()
        if (other >= 0) break;
        ((T*)a.out)[i] = narrow<T>(finish<OP, A>(acc, a.divisor));
    }
    JCCL_ONESHOT_COMPARE()  // a thread without elements still reports (thread 0 of every block)
#undef JCCL_ONESHOT_COMPARE
    if (other >= 0 && threadIdx.x == 0) {
        report_mismatch(a.status, a.epoch, other, theirs, guard);
    }
}

// Releases the one-shot all-reduce kernels that wait at operation `epoch` for this rank, whose call
// there exchanged records on the host instead (it differs from theirs, or its settings chose another
// algorithm; the host found that and raised the mismatch): for every block slot, stores this rank's
// guard word (a.count, bit 0 set: "did not run the one-shot") into its column of every peer's guard
// line of the epoch's parity, then the epoch into its column of the peer's START flags. The waiting
// kernels find a word that is not theirs, write no output and record the mismatch; peers not in a
// one-shot at that epoch launch nothing there (every rank's call at that epoch fails on the host).
// Queued on the failing call's stream, after this rank's earlier kernels, whose START flags it must
// not overtake. One block of JCCL_MAX_BLOCKS threads; waits for nothing.
extern "C" __global__ void __launch_bounds__(512) jccl_oneshot_release(Args a) {
    const int b = threadIdx.x;
    if (b >= JCCL_MAX_BLOCKS) return;
    const uint64_t line = SIG_GUARD + ((a.epoch & 1) * JCCL_MAX_BLOCKS + b) * JCCL_MAX_RANKS;
    for (int q = 0; q < a.nranks; q++) {
        if (q != a.rank) ((uint64_t*)a.signal[q])[line + a.rank] = a.count;
    }
    __threadfence_system();
    for (int q = 0; q < a.nranks; q++) {
        if (q != a.rank) st_release_sys((uint64_t*)a.signal[q] + SIG_START + b * JCCL_MAX_RANKS + a.rank, a.epoch);
    }
}

// Per-block flag round among all ranks on the given slot kind (fence first: my stores land before the flag).
__device__ __forceinline__ bool flag_round(const uint64_t* const* signal, int kindBase, int rank, int n, uint64_t epoch,
                                           uint64_t abortFlag, uint64_t status, uint64_t timeoutNs, int* failed) {
    if (threadIdx.x < n && threadIdx.x != rank) {
        int q = threadIdx.x;
        __threadfence_system();
        st_release_sys((uint64_t*)signal[q] + kindBase + blockIdx.x * JCCL_MAX_RANKS + rank, epoch);
        if (!wait_geq(signal[rank] + kindBase + blockIdx.x * JCCL_MAX_RANKS + q, epoch, abortFlag, status, timeoutNs, epoch, q)) {
            *failed = 1;
        }
    }
    __syncthreads();
    return *failed == 0;
}

template <typename T, int OP> __device__ __forceinline__ void push_body(const PushArgs& a) {
    typedef typename Acc<T>::type A;
    constexpr int N = 16 / sizeof(T);
    __shared__ int failed;
    if (threadIdx.x == 0) failed = 0;
    __syncthreads();
    const int n = a.nranks;
    const int r = a.rank;
    const uint64_t slice = a.slice;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const T* in = (const T*)a.in;
    // 1. slice q of my input -> rank q's scratch slot for me
    for (int k = 1; k < n; k++) {
        int q = (r + k) % n;
        uint64_t lo = (uint64_t)q * slice;
        uint64_t len = lo >= a.count ? 0 : (a.count - lo < slice ? a.count - lo : slice);
        uint64_t nvec = (a.vec & PUSH_VEC) ? len / N : 0;
        for (uint64_t v = tid; v < nvec; v += stride) ((uint4*)a.peerScratch[q])[v] = ((const uint4*)(in + lo))[v];
        for (uint64_t i = nvec * N + tid; i < len; i += stride) ((T*)a.peerScratch[q])[i] = in[lo + i];
    }
    __syncthreads();
    if (!flag_round((const uint64_t* const*)a.signal, SIG_START, r, n, a.epoch, a.abortFlag, a.status, a.timeoutNs, &failed)) return;
    // 2. reduce my slice in rank order, store to my output and every peer's
    uint64_t lo = (uint64_t)r * slice;
    uint64_t len = lo >= a.count ? 0 : (a.count - lo < slice ? a.count - lo : slice);
    uint64_t nvec = (a.vec & PUSH_VEC) ? len / N : 0;
    const bool serial = (a.vec & PUSH_SERIAL) != 0;
    for (uint64_t v = tid; v < nvec; v += stride) {
        uint4 x[JCCL_MAX_RANKS];
#pragma unroll
        for (int s = 0; s < JCCL_MAX_RANKS; s++) {
            if (s < n) x[s] = s == r ? ((const uint4*)(in + lo))[v] : ((const uint4*)a.myScratch[s])[v];
        }
        uint4 o = combine_vec<T, OP>(x, n, a.divisor);
        if (serial) {
            ((uint4*)((T*)a.peerOut[r] + lo))[v] = o;
            continue;
        }
#pragma unroll
        for (int q = 0; q < JCCL_MAX_RANKS; q++) {
            if (q < n) ((uint4*)((T*)a.peerOut[q] + lo))[v] = o;
        }
    }
    if (serial) {
        // the reduced slice, now in my output, goes to one peer at a time (each thread rereads what it wrote)
        for (int k = 1; k < n; k++) {
            const int q = (r + k) % n;
            const uint4* src = (const uint4*)((T*)a.peerOut[r] + lo);
            uint4* dst = (uint4*)((T*)a.peerOut[q] + lo);
            uint64_t v = tid;
            for (; v + stride < nvec; v += 2 * stride) {
                uint4 x0 = src[v], x1 = src[v + stride];
                dst[v] = x0;
                dst[v + stride] = x1;
            }
            for (; v < nvec; v += stride) dst[v] = src[v];
        }
    }
    for (uint64_t i = nvec * N + tid; i < len; i += stride) {
        A acc = widen<T>(0 == r ? in[lo + i] : ((const T*)a.myScratch[0])[i]);
        for (int s = 1; s < n; s++) acc = combine<OP, A>(acc, widen<T>(s == r ? in[lo + i] : ((const T*)a.myScratch[s])[i]));
        T res = narrow<T>(finish<OP, A>(acc, a.divisor));
        for (int q = 0; q < n; q++) ((T*)a.peerOut[q])[lo + i] = res;
    }
    __syncthreads();
    flag_round((const uint64_t* const*)a.signal, SIG_END, r, n, a.epoch, a.abortFlag, a.status, a.timeoutNs, &failed);
}

// ---------------------------------------------------------------------------------------------
// ring all-reduce: every GPU stores to one peer only, its successor (on NVSwitch the pattern that
// reaches the links' best rate, as send/recv does). Arguments in PushArgs: peerScratch[succ] = the
// successor's push scratch region, myScratch[0] = mine, peerOut[succ] = the successor's output,
// slice = elements per block per step (a multiple of 16 bytes), count = elements.
// The buffer is cut into n chunks; a round covers one slice of every chunk per block. Reduce-scatter:
// in step s (0..n-2) rank r stores the partial sum of chunk r-s into a slot of its successor's
// scratch (RING_SLOTS slots per block), the successor adds its own input to it in the next step; step
// n-1 completes chunk r+1, stored into my output and the successor's. All-gather: n-2 steps forward
// the completed chunk that just arrived from the predecessor, from my output into the successor's.
// Per block, two monotonic counters carry the protocol (values epoch << 24 plus a count): "arrived"
// at the receiver (transfers landed) and "freed" at the sender (slots emptied; the value epoch << 24
// alone says "my kernel for this operation runs", so my output may be written). An end barrier
// closes the operation, so no later kernel of any algorithm finds a slot still being read.
#define RING_SLOTS 4

// dst0[i] (and dst1[i] when dst1) = part[i] op mine[i] (or mine[i] when part is null), i < len;
// divisor: AVG's, 1 for partial sums. Four vectors in flight per thread.
template <typename T, int OP>
__device__ __forceinline__ void ring_step(T* dst0, T* dst1, const T* mine, const T* part, uint64_t len, bool vec, int divisor) {
    typedef typename Acc<T>::type A;
    constexpr int N = 16 / sizeof(T);
    const uint64_t nvec = vec ? len / N : 0;
    const uint4* m = (const uint4*)mine;
    const uint4* p = (const uint4*)part;
    uint4* d0 = (uint4*)dst0;
    uint4* d1 = (uint4*)dst1;
    const uint64_t stride = blockDim.x;
    uint64_t v = threadIdx.x;
    for (; v + 3 * stride < nvec; v += 4 * stride) {
        uint4 x[4][JCCL_MAX_RANKS];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            x[u][1] = m[v + u * stride];
            if (part) x[u][0] = p[v + u * stride];
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            uint4 o = part ? combine_vec<T, OP>(x[u], 2, divisor) : x[u][1];
            d0[v + u * stride] = o;
            if (dst1) d1[v + u * stride] = o;
        }
    }
    for (; v < nvec; v += stride) {
        uint4 x[JCCL_MAX_RANKS];
        x[1] = m[v];
        if (part) x[0] = p[v];
        uint4 o = part ? combine_vec<T, OP>(x, 2, divisor) : x[1];
        d0[v] = o;
        if (dst1) d1[v] = o;
    }
    for (uint64_t i = nvec * N + threadIdx.x; i < len; i += stride) {
        T o = mine[i];
        if (part) o = narrow<T>(finish<OP, A>(combine<OP, A>(widen<T>(part[i]), widen<T>(mine[i])), divisor));
        dst0[i] = o;
        if (dst1) dst1[i] = o;
    }
}

// Elements of chunk c's slice at offset o (inside the chunk) that exist: at most len, not past the chunk or count.
__device__ __forceinline__ uint64_t ring_len(uint64_t o, uint64_t len, uint64_t chunk, int c, uint64_t count) {
    if (o >= chunk) return 0;
    uint64_t l = chunk - o < len ? chunk - o : len;
    const uint64_t lo = (uint64_t)c * chunk + o;
    if (lo >= count) return 0;
    return count - lo < l ? count - lo : l;
}

template <typename T, int OP> __device__ __forceinline__ void ring_body(const PushArgs& a) {
    constexpr int N = 16 / sizeof(T);
    __shared__ int failed;
    if (threadIdx.x == 0) failed = 0;
    __syncthreads();
    const int n = a.nranks, r = a.rank, succ = (r + 1) % n, pred = (r + n - 1) % n;
    const int b = blockIdx.x;
    const uint64_t count = a.count, sl = a.slice;
    const uint64_t chunk = ((count + n - 1) / n + N - 1) / N * N;
    const uint64_t span = sl * gridDim.x;
    const uint64_t rounds = (chunk + span - 1) / span;
    const bool vec = (a.vec & PUSH_VEC) != 0;
    const uint64_t base = a.epoch << 24;
    uint64_t* arrivedMine = (uint64_t*)a.signal[r] + SIG_RING_ARRIVED + b;
    uint64_t* arrivedSucc = (uint64_t*)a.signal[succ] + SIG_RING_ARRIVED + b;
    uint64_t* freedMine = (uint64_t*)a.signal[r] + SIG_RING_FREED + b;
    uint64_t* freedPred = (uint64_t*)a.signal[pred] + SIG_RING_FREED + b;
    T* mySlots = (T*)a.myScratch[0] + (uint64_t)b * RING_SLOTS * sl;
    T* succSlots = (T*)a.peerScratch[succ] + (uint64_t)b * RING_SLOTS * sl;
    const T* in = (const T*)a.in;
    T* out = (T*)a.out;
    T* succOut = (T*)a.peerOut[succ];
    if (threadIdx.x == 0) {
        st_release_sys(freedPred, base);  // my kernel runs: my output and slots are the predecessor's to fill
    }
    uint64_t sent = 0, recvd = 0, rsSent = 0, rsRecvd = 0;
    for (uint64_t j = 0; j < rounds; j++) {
        const uint64_t o = j * span + (uint64_t)b * sl;
        for (int s = 0; s < n; s++) {
            const int c = (r - s + n) % n;
            const bool last = s == n - 1;
            const uint64_t len = ring_len(o, sl, chunk, c, count);
            if (threadIdx.x == 0) {
                bool ok = true;
                if (s > 0) ok = wait_geq(arrivedMine, base + recvd + 1, a.abortFlag, a.status, a.timeoutNs, a.epoch, pred);
                if (ok && !last) {
                    const uint64_t need = rsSent >= RING_SLOTS ? rsSent - RING_SLOTS + 1 : 0;
                    ok = wait_geq(freedMine, base + need, a.abortFlag, a.status, a.timeoutNs, a.epoch, succ);
                }
                if (ok && last && j == 0) ok = wait_geq(freedMine, base, a.abortFlag, a.status, a.timeoutNs, a.epoch, succ);
                if (!ok) failed = 1;
            }
            __syncthreads();
            if (failed) return;
            const T* part = s > 0 ? mySlots + (rsRecvd % RING_SLOTS) * sl : nullptr;
            const uint64_t lo = (uint64_t)c * chunk + o;
            if (!last) {
                ring_step<T, OP>(succSlots + (rsSent % RING_SLOTS) * sl, nullptr, in + lo, part, len, vec, 1);
            } else {
                ring_step<T, OP>(out + lo, succOut + lo, in + lo, part, len, vec, a.divisor);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                // bar.sync, then release stores at system scope: the block's loads of the slot and its
                // stores to the successor are ordered before the flags (cumulativity)
                if (s > 0) st_release_sys(freedPred, base + rsRecvd + 1);
                st_release_sys(arrivedSucc, base + sent + 1);
            }
            if (s > 0) {
                recvd++;
                rsRecvd++;
            }
            sent++;
            if (!last) rsSent++;
        }
        for (int s = 1; s <= n - 2; s++) {
            const int c = (r - s + 1 + n) % n;
            const uint64_t len = ring_len(o, sl, chunk, c, count);
            if (threadIdx.x == 0 &&
                !wait_geq(arrivedMine, base + recvd + 1, a.abortFlag, a.status, a.timeoutNs, a.epoch, pred)) {
                failed = 1;
            }
            __syncthreads();
            if (failed) return;
            const uint64_t lo = (uint64_t)c * chunk + o;
            ring_step<T, OP>(succOut + lo, nullptr, out + lo, nullptr, len, vec, 1);
            __syncthreads();
            if (threadIdx.x == 0) st_release_sys(arrivedSucc, base + sent + 1);
            recvd++;
            sent++;
        }
        recvd++;  // the round's last chunk from the predecessor: waited for by the next wait (counters are ordered)
    }
    if (threadIdx.x == 0 && !wait_geq(arrivedMine, base + recvd, a.abortFlag, a.status, a.timeoutNs, a.epoch, pred)) {
        failed = 1;
    }
    __syncthreads();
    if (failed) return;
    flag_round((const uint64_t* const*)a.signal, SIG_END, r, n, a.epoch, a.abortFlag, a.status, a.timeoutNs, &failed);
}

#define REDUCE_KERNEL(TNAME, T, OPNAME, OP)                                                                                 \
    extern "C" __global__ void __launch_bounds__(512) jccl_reduce_##TNAME##_##OPNAME(Args a) { reduce_body<T, OP>(a); }     \
    extern "C" __global__ void __launch_bounds__(512) jccl_oneshot_##TNAME##_##OPNAME(OneShotArgs a) { oneshot_body<T, OP>(a); } \
    extern "C" __global__ void __launch_bounds__(512) jccl_push_##TNAME##_##OPNAME(PushArgs a) { push_body<T, OP>(a); }     \
    extern "C" __global__ void __launch_bounds__(512) jccl_ring_##TNAME##_##OPNAME(PushArgs a) { ring_body<T, OP>(a); }

#define REDUCE_KERNELS(TNAME, T)            \
    REDUCE_KERNEL(TNAME, T, sum, OP_SUM)    \
    REDUCE_KERNEL(TNAME, T, prod, OP_PROD)  \
    REDUCE_KERNEL(TNAME, T, min, OP_MIN)    \
    REDUCE_KERNEL(TNAME, T, max, OP_MAX)    \
    REDUCE_KERNEL(TNAME, T, avg, OP_AVG)

REDUCE_KERNELS(int8, int8_t)
REDUCE_KERNELS(uint8, uint8_t)
REDUCE_KERNELS(int32, int32_t)
REDUCE_KERNELS(uint32, uint32_t)
REDUCE_KERNELS(int64, int64_t)
REDUCE_KERNELS(uint64, uint64_t)
REDUCE_KERNELS(half, __half)
REDUCE_KERNELS(bfloat16, __nv_bfloat16)
REDUCE_KERNELS(float, float)
REDUCE_KERNELS(double, double)

// ---------------------------------------------------------------------------------------------
// copy: MULTI_DST: src[0] -> dst[0..ndst); else src[t] -> dst[t] for t < nsrc. count = bytes.
// A destination equal to its source is skipped (in-place slots).

// Copies len bytes from src to each of dst[0..nd) (a destination equal to src is skipped): 16-byte
// accesses when vec (all pointers and len's vector part aligned), four loads in flight per thread
// before their stores so remote latency overlaps.
__device__ __forceinline__ void copy_range(uint64_t src, const uint64_t (&dst)[JCCL_MAX_RANKS], int nd, uint64_t len, bool vec,
                                           uint64_t tid, uint64_t stride) {
    const uint64_t nvec = vec ? len / 16 : 0;
    const uint4* s = (const uint4*)src;
    uint64_t v = tid;
    for (; v + 3 * stride < nvec; v += 4 * stride) {
        uint4 x0 = s[v], x1 = s[v + stride], x2 = s[v + 2 * stride], x3 = s[v + 3 * stride];
#pragma unroll
        for (int d = 0; d < JCCL_MAX_RANKS; d++) {
            if (d < nd && dst[d] != src) {
                uint4* o = (uint4*)dst[d];
                o[v] = x0;
                o[v + stride] = x1;
                o[v + 2 * stride] = x2;
                o[v + 3 * stride] = x3;
            }
        }
    }
    for (; v < nvec; v += stride) {
        uint4 x = s[v];
#pragma unroll
        for (int d = 0; d < JCCL_MAX_RANKS; d++) {
            if (d < nd && dst[d] != src) ((uint4*)dst[d])[v] = x;
        }
    }
    for (uint64_t i = nvec * 16 + tid; i < len; i += stride) {
        uint8_t x = ((const uint8_t*)src)[i];
        for (int d = 0; d < nd; d++) {
            if (dst[d] != src) ((uint8_t*)dst[d])[i] = x;
        }
    }
}

__device__ __forceinline__ void copy_bytes(const Args& a) {
    const uint64_t bytes = a.count;
    const bool vec = (a.mode & MODE_VEC) != 0;
    uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    if (a.mode & MODE_MULTI_DST) {
        copy_range(a.src[0], a.dst, a.ndst, bytes, vec, tid, stride);
        return;
    }
    const int ntask = a.nsrc;
    if ((a.mode & MODE_SPLIT) && gridDim.x >= (unsigned)ntask) {
        // All tasks at once (all-to-all: every peer's link busy): group g of the blocks copies task
        // rank + g, so at any moment the ranks write to all their peers. gridDim is a multiple of ntask.
        const int t = (a.rank + (int)(blockIdx.x % ntask)) % ntask;
        const uint64_t groupBlocks = gridDim.x / ntask;
        tid = (uint64_t)(blockIdx.x / ntask) * blockDim.x + threadIdx.x;
        stride = groupBlocks * blockDim.x;
        uint64_t d[JCCL_MAX_RANKS] = {a.dst[t]};
        copy_range(a.src[t], d, 1, bytes, vec, tid, stride);
        return;
    }
    // Tasks in an order rotated by rank (all-to-all: rank r writes to peer r+1, r+2, ... in turn), so
    // the ranks write to different peers at any moment instead of all into rank 0's links first.
    for (int k = 0; k < ntask; k++) {
        const int t = (a.rank + k) % ntask;
        uint64_t d[JCCL_MAX_RANKS] = {a.dst[t]};
        copy_range(a.src[t], d, 1, bytes, vec, tid, stride);
    }
}

extern "C" __global__ void __launch_bounds__(512) jccl_copy(Args a) {
    if ((a.mode & MODE_START) && !block_barrier(a, SIG_START, false)) {
        return;
    }
    copy_bytes(a);
    if (a.mode & MODE_END) {
        block_barrier(a, SIG_END, true);
    }
}

// ---------------------------------------------------------------------------------------------
// bcast: pipelined broadcast by stores only, balanced so the root's outgoing links carry each byte
// once. Args: src[0] = the root's input (used by the root), dst[q] = rank q's output (mapped here),
// nsrc = root, divisor = bytes per block per round (a multiple of 16), count = bytes.
// The data is cut into n-1 slices, one per non-root rank j. In round k the root's block b stores its
// part of round k of every slice j straight into rank j's output, then raises rank j's pipe flag for
// block b; block b of rank j waits for that flag and forwards the same part from its own output to
// every other non-root's output. The root never waits inside the rounds, so the two stages overlap.
// Start barrier: every output is free; end barrier: every store has landed.
// MODE_CHAIN: the same rounds along a chain root -> root+1 -> ..., so that every GPU stores to one
// peer only (measured faster than storing to several peers at once on NVSwitch).

// MODE_CHAIN | MODE_ROLES: the block chain with the per-round flag taken off the copying warps' path.
// In every block the last two warps signal (even and odd rounds), the one before them polls, the
// others copy. Round k: the poller waits for the predecessor's flag for round k (and, before round 0,
// for the successor's "started" word), then meets the copiers at barrier 1; they copy the block's part
// of round k and meet signaller k % 2 at barrier 2 + k % 2, which publishes round k into the
// successor's signal area with a release store at system scope (ordered after the copiers' stores by
// the barrier: cumulativity). The copiers go on while that store waits for their stores to land: they
// wait for a signaller only if its previous store (two rounds back) has not completed, so the fence
// costs the pipeline latency, not every round a stall. Each parity has its own flag word per block
// (SIG_PIPE + 2 block + parity, values epoch << 24 plus round + 1), so the two signallers never
// publish out of order into one word.
// Start: every non-root tells its predecessor that its kernel runs (its output is free) through its
// SIG_START word at the predecessor; the predecessor's poller waits for that before round 0. No end
// barrier: a rank's kernel ends once it has seen every round's flag from its predecessor, so its
// output is complete, and nobody reads another rank's memory. Failures: the poller records the round
// of a failed wait in `failedAt` before barrier 1; the copiers skip that round's copy, still meet the
// round's signaller and, when there is a next round, the other signaller too; each signaller then
// stores nothing and leaves, so no barrier waits for a warp that has gone. The poller may record round
// k + 1 while the others finish round k, so each compares failedAt with its own round.
__device__ __forceinline__ void bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ void bcast_chain_roles(const Args& a) {
    __shared__ volatile uint64_t failedAt;  // the round whose wait failed; written by the poller only
    const int n = a.nranks, root = a.nsrc, r = a.rank;
    const int pos = (r - root + n) % n, succ = (r + 1) % n, pred = (r - 1 + n) % n;
    const uint64_t bytes = a.count, part = (uint64_t)a.divisor, round = part * gridDim.x;
    const uint64_t rounds = (bytes + round - 1) / round;
    const bool vec = (a.mode & MODE_VEC) != 0;
    const uint64_t base = a.epoch << 24;
    uint64_t* mine = (uint64_t*)a.signal[r];
    uint64_t* flags = mine + SIG_PIPE + 2 * blockIdx.x;  // [parity]: written by the predecessor
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const int copiers = (warps - 3) * 32, team = copiers + 32;
    if (threadIdx.x == 0) {
        failedAt = ~0ull;
        if (pos > 0) {
            st_release_sys((uint64_t*)a.signal[pred] + SIG_START + blockIdx.x * JCCL_MAX_RANKS + r, a.epoch);
        }
    }
    __syncthreads();
    if (pos == n - 1) {
        // last in the chain: receives only; done once the predecessor's last flag of each parity is here
        if (threadIdx.x < 2 && (uint64_t)threadIdx.x < rounds) {
            const uint64_t last = rounds - 1 - ((rounds - 1 - threadIdx.x) & 1);  // the last round of this parity
            wait_geq_poll(flags + threadIdx.x, base + last + 1, a.abortFlag, a.status, a.timeoutNs, a.epoch, pred);
        }
        return;
    }
    if (warp == warps - 3) {
        // poller
        for (uint64_t k = 0; k < rounds; k++) {
            if (lane == 0) {
                if (k == 0 && !wait_geq_poll(mine + SIG_START + blockIdx.x * JCCL_MAX_RANKS + succ, a.epoch, a.abortFlag, a.status,
                                             a.timeoutNs, a.epoch, succ)) {
                    failedAt = k;
                } else if (pos > 0 && !wait_geq_poll(flags + (k & 1), base + k + 1, a.abortFlag, a.status, a.timeoutNs, a.epoch,
                                                     pred)) {
                    failedAt = k;
                }
            }
            __syncwarp();
            const bool ok = failedAt > k;
            bar_sync(1, team);
            if (!ok) return;
        }
    } else if (warp >= warps - 2) {
        // signaller of rounds k with k % 2 == p
        const int p = warp - (warps - 2);
        uint64_t* theirs = (uint64_t*)a.signal[succ] + SIG_PIPE + 2 * blockIdx.x + p;
        for (uint64_t k = p; k < rounds; k += 2) {
            bar_sync(2 + p, team);
            if (failedAt <= k) return;  // round k was not copied (a later round's failure leaves it > k)
            if (lane == 0) {
                st_release_sys(theirs, base + k + 1);
            }
        }
    } else {
        // copiers
        for (uint64_t k = 0; k < rounds; k++) {
            bar_sync(1, team);
            const bool ok = failedAt > k;
            if (ok) {
                const uint64_t off = k * round + blockIdx.x * part;
                const uint64_t len = off >= bytes ? 0 : (bytes - off < part ? bytes - off : part);
                if (pos > 0) {
                    uint64_t d[JCCL_MAX_RANKS] = {a.dst[succ] + off};
                    copy_range(a.dst[r] + off, d, 1, len, vec, threadIdx.x, copiers);
                } else {
                    uint64_t d[JCCL_MAX_RANKS] = {a.dst[succ] + off, a.dst[r] + off};
                    copy_range(a.src[0] + off, d, 2, len, vec, threadIdx.x, copiers);
                }
            }
            bar_sync(2 + (int)(k & 1), team);
            if (!ok) {
                if (k + 1 < rounds) {
                    bar_sync(2 + (int)((k + 1) & 1), team);  // lets the other signaller see the failure and leave
                }
                return;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(512) jccl_bcast(Args a) {
    __shared__ int failed;
    if ((a.mode & MODE_START) && !block_barrier(a, SIG_START, false)) {
        return;
    }
    if (threadIdx.x == 0) failed = 0;
    __syncthreads();
    const int n = a.nranks, root = a.nsrc, r = a.rank;
    const uint64_t bytes = a.count;
    const uint64_t part = (uint64_t)a.divisor;
    const uint64_t round = part * gridDim.x;
    const bool vec = (a.mode & MODE_VEC) != 0;
    const uint64_t base = a.epoch << 24;
    uint64_t* mine = (uint64_t*)a.signal[r];
    if ((a.mode & MODE_CHAIN) && (a.mode & MODE_ROLES)) {
        bcast_chain_roles(a);
        return;
    }
    if ((a.mode & MODE_CHAIN) && (a.mode & MODE_WARPS)) {
        // Chain with a pipeline per warp: warp w of every rank covers part bytes at w's place in every
        // round, waits for its own flag and raises its successor's, so one warp's flag and fence overlap
        // the other warps' copies. Flags SIG_PIPE + warp: at most 1792 warps (the host caps the grid).
        const int pos = (r - root + n) % n;
        const int succ = (r + 1) % n;
        const int lane = threadIdx.x % 32;
        const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
        const uint64_t w = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
        const uint64_t wround = part * warps;
        const uint64_t rounds = (bytes + wround - 1) / wround;
        if (pos != n - 1) {
            for (uint64_t k = 0; k < rounds; k++) {
                const uint64_t off = k * wround + w * part;
                const uint64_t len = off >= bytes ? 0 : (bytes - off < part ? bytes - off : part);
                if (pos > 0) {
                    int bad = 0;
                    if (lane == 0 && !wait_geq_poll(mine + SIG_PIPE + w, base + k + 1, a.abortFlag, a.status, a.timeoutNs, a.epoch,
                                               (r - 1 + n) % n)) {
                        bad = 1;
                    }
                    bad = __shfl_sync(0xffffffffu, bad, 0);
                    if (bad) {
                        failed = 1;  // the other warps' waits see the status word and stop too
                        break;
                    }
                    uint64_t d[JCCL_MAX_RANKS] = {a.dst[succ] + off};
                    copy_range(a.dst[r] + off, d, 1, len, vec, lane, 32);
                } else {
                    uint64_t d[JCCL_MAX_RANKS] = {a.dst[succ] + off, a.dst[r] + off};
                    copy_range(a.src[0] + off, d, 2, len, vec, lane, 32);
                }
                __syncwarp();
                if (lane == 0) {
                    // the warp barrier orders the lanes' stores before lane 0's release store (cumulativity)
                    st_release_sys((uint64_t*)a.signal[succ] + SIG_PIPE + w, base + k + 1);
                }
            }
        }
        __syncthreads();
        if (failed) return;
        if (a.mode & MODE_END) {
            block_barrier(a, SIG_END, true);
        }
        return;
    }
    if (a.mode & MODE_CHAIN) {
        // Chain: position p = r - root; rank p stores each round into rank p+1's output (the root
        // from its input, the others from their own output once rank p-1's flag says it landed).
        const int pos = (r - root + n) % n;
        const int succ = (r + 1) % n;
        const uint64_t rounds = (bytes + round - 1) / round;
        if (pos == n - 1) {
            // last in the chain: receives only; the end barrier covers the predecessor's stores
        } else {
            for (uint64_t k = 0; k < rounds; k++) {
                const uint64_t off = k * round + blockIdx.x * part;
                const uint64_t len = off >= bytes ? 0 : (bytes - off < part ? bytes - off : part);
                if (pos > 0) {
                    if (threadIdx.x == 0 && !wait_geq_poll(mine + SIG_PIPE + blockIdx.x, base + k + 1, a.abortFlag, a.status,
                                                           a.timeoutNs, a.epoch, (r - 1 + n) % n)) {
                        failed = 1;
                    }
                    __syncthreads();
                    if (failed) return;
                    uint64_t d[JCCL_MAX_RANKS] = {a.dst[succ] + off};
                    copy_range(a.dst[r] + off, d, 1, len, vec, threadIdx.x, blockDim.x);
                } else {
                    uint64_t d[JCCL_MAX_RANKS] = {a.dst[succ] + off, a.dst[r] + off};
                    copy_range(a.src[0] + off, d, 2, len, vec, threadIdx.x, blockDim.x);
                }
                __syncthreads();
                if (threadIdx.x == 0) {
                    // bar.sync then a release store at system scope: the block's stores are ordered
                    // before the flag (cumulativity), without a full fence.sc per round
                    st_release_sys((uint64_t*)a.signal[succ] + SIG_PIPE + blockIdx.x, base + k + 1);
                }
            }
        }
        if (a.mode & MODE_END) {
            block_barrier(a, SIG_END, true);
        }
        return;
    }
    const uint64_t slice = ((bytes + n - 2) / (n - 1) + 15) / 16 * 16;
    const uint64_t rounds = (slice + round - 1) / round;
    if (r == root) {
        for (uint64_t k = 0; k < rounds; k++) {
            const uint64_t in = k * round + blockIdx.x * part;  // offset inside each slice
            for (int j = 0; j < n - 1; j++) {
                const int q = j < root ? j : j + 1;
                const uint64_t off = j * slice + in;
                uint64_t len = in >= slice ? 0 : (slice - in < part ? slice - in : part);
                len = off >= bytes ? 0 : (bytes - off < len ? bytes - off : len);
                uint64_t d[JCCL_MAX_RANKS] = {a.dst[q] + off, a.dst[root] + off};
                copy_range(a.src[0] + off, d, 2, len, vec, threadIdx.x, blockDim.x);
            }
            __syncthreads();
            if (threadIdx.x < n - 1) {
                const int q = threadIdx.x < root ? threadIdx.x : threadIdx.x + 1;
                st_release_sys((uint64_t*)a.signal[q] + SIG_PIPE + blockIdx.x, base + k + 1);
            }
        }
    } else {
        const int j = r < root ? r : r - 1;
        uint64_t d[JCCL_MAX_RANKS];
        int nd = 0;
#pragma unroll
        for (int q = 0; q < JCCL_MAX_RANKS; q++) {
            if (q < n && q != root && q != r) d[nd++] = a.dst[q];
        }
        for (uint64_t k = 0; k < rounds; k++) {
            const uint64_t in = k * round + blockIdx.x * part;
            const uint64_t off = j * slice + in;
            uint64_t len = in >= slice ? 0 : (slice - in < part ? slice - in : part);
            len = off >= bytes ? 0 : (bytes - off < len ? bytes - off : len);
            if (threadIdx.x == 0 && !wait_geq(mine + SIG_PIPE + blockIdx.x, base + k + 1, a.abortFlag, a.status, a.timeoutNs,
                                              a.epoch, root)) {
                failed = 1;
            }
            __syncthreads();
            if (failed) return;
            __syncthreads();  // every thread has read failed before thread 0 waits for the next round
            uint64_t dd[JCCL_MAX_RANKS];
#pragma unroll
            for (int q = 0; q < JCCL_MAX_RANKS; q++) dd[q] = q < nd ? d[q] + off : 0;
            copy_range(a.dst[r] + off, dd, nd, len, vec, threadIdx.x, blockDim.x);
        }
    }
    if (a.mode & MODE_END) {
        block_barrier(a, SIG_END, true);
    }
}

// ---------------------------------------------------------------------------------------------
// flags: see struct FlagArgs. Launched with one block of 32 threads.

extern "C" __global__ void __launch_bounds__(512) jccl_flags(FlagArgs a) {
    const int t = threadIdx.x;
    if (t < a.nset && ld_volatile_sys((const uint64_t*)a.status) == 0) {
        __threadfence_system();
        st_release_sys((uint64_t*)a.setAddr[t], a.setValue);
    }
    if (t < a.nwait) {
        wait_geq((const uint64_t*)a.waitAddr[t], a.waitValue[t], a.abortFlag, a.status, a.timeoutNs, a.epoch, a.waitPeer[t]);
    }
}

// ---------------------------------------------------------------------------------------------
// p2p: a group's sends and receives. A receiver tells each sender "ready" (its kernel runs, so
// the receive buffer is free); senders wait for that, push their bytes into the receiver's
// buffer, and the last block to finish tells each receiver "done"; receivers wait for "done".

extern "C" __global__ void __launch_bounds__(512) jccl_p2p(P2pArgs a) {
    __shared__ int failed;
    if (threadIdx.x == 0) failed = 0;
    const uint64_t* mine = (const uint64_t*)a.signal[a.rank];
    if (blockIdx.x == 0 && threadIdx.x < a.nrecv) {
        int peer = a.recvPeer[threadIdx.x];
        st_release_sys((uint64_t*)a.signal[peer] + SIG_READY + a.rank, a.recvSeq[threadIdx.x]);
    }
    __syncthreads();
    if (threadIdx.x < a.nsend) {
        int peer = a.sendPeer[threadIdx.x];
        if (!wait_geq(mine + SIG_READY + peer, a.sendSeq[threadIdx.x], a.abortFlag, a.status, a.timeoutNs,
                      a.sendSeq[threadIdx.x], peer)) {
            failed = 1;
        }
    }
    __syncthreads();
    if (failed) return;
    const uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (int t = 0; t < a.nsend; t++) {
        const uint64_t bytes = a.sendBytes[t];
        const uint64_t src = a.sendSrc[t], dst = a.sendDst[t];
        const uint64_t nvec = a.vec ? bytes / 16 : 0;
        for (uint64_t v = tid; v < nvec; v += stride) ((uint4*)dst)[v] = ((const uint4*)src)[v];
        for (uint64_t i = nvec * 16 + tid; i < bytes; i += stride) ((uint8_t*)dst)[i] = ((const uint8_t*)src)[i];
    }
    __syncthreads();
    if (a.nsend > 0 && threadIdx.x == 0) {
        __threadfence_system();
        unsigned long long* counter = (unsigned long long*)((uint64_t*)a.signal[a.rank] + SIG_COUNTER);
        unsigned long long prev = atomicAdd(counter, 1ull);
        if (prev == a.blocksBase + gridDim.x - 1) {
            __threadfence_system();
            for (int t = 0; t < a.nsend; t++) {
                st_release_sys((uint64_t*)a.signal[a.sendPeer[t]] + SIG_DONE + a.rank, a.sendSeq[t]);
            }
        }
    }
    if (blockIdx.x == 0 && threadIdx.x < a.nrecv) {
        int peer = a.recvPeer[threadIdx.x];
        wait_geq(mine + SIG_DONE + peer, a.recvSeq[threadIdx.x], a.abortFlag, a.status, a.timeoutNs,
                 a.recvSeq[threadIdx.x], peer);
    }
}
