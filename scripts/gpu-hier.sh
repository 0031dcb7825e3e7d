#!/usr/bin/env bash
# Hierarchical GPU collectives (issue 21) ON the lent 4-GPU machine, from the repository root, with
# .device/ made by scripts/gpu-prep.sh carried along. One machine stands in for several hosts:
# JCCL_HOSTID gives every rank (one process per GPU, `jccl run --bind-to none`) a host identity, so
# same-"host" GPUs use jccl's kernels over CUDA IPC and the legs between "hosts" go over TCP on lo.
#
#   scripts/gpu-hier.sh [--dry-run] PHASE...     PHASE: check kill perf
#
#   check  every collective (perf -c 1 checks each result) in the shapes 2x2 (a,a,b,b), 2x2
#          interleaved (a,b,a,b), 4x1, uneven 2+1 and 1+2 (3 GPUs), float 8 B..64 MB (odd counts
#          through -b 12 -f 3, step boundaries through JCCL_CUDA_HIER_CHUNK=256K) and bfloat16
#                                                                                  -> $OUT/hier-check.txt
#   kill   2x2, all_reduce 1 GB in a loop, rank 3's JVM killed with SIGKILL after 25 s (its shell lives on 60 s
#          more, so `jccl run` does not stop the others): every other rank must fail naming rank 3
#          within JCCL_PEER_TIMEOUT=10 s, so the job ends ~10-20 s after the kill, not at the
#          110 s limit ("job ended N s after the kill"; lines "failed: ... rank 3")   -> $OUT/hier-kill.txt
#   perf   all_reduce 8 B..1 GB, 2 emulated hosts x 2 GPUs and 4 x 1: jccl (hierarchical), jccl staged
#          (JCCL_CUDA_HIER=0), NCCL default sockets, NCCL 4 threads x 4 sockets (NCCL_HOSTID per process,
#          NCCL_SOCKET_IFNAME=lo, NCCL_NVLS_ENABLE=0, NCCL_MNNVL_ENABLE=0)          -> $OUT/hier-perf.txt
# Suggested calls (each under 10 minutes): `scripts/gpu-hier.sh check kill`, `scripts/gpu-hier.sh perf`. One short
# call (~6-8 min) for reduce_scatter in 2x2 and 4x1, the kill check and the 2x2 perf beside NCCL (4 files in $OUT):
#   T=60 CHECK_SHAPES="4:a,a,b,b 4:a,b,c,d" CHECK_COLLS="reduce_scatter all_reduce" CHECK_EXTRA=0 PERF_SHAPES=2x2 \
#       PERF_MAX=256M scripts/gpu-hier.sh check kill perf
# Environment: OUT (default /tmp/gpu-hier-out), CLI (default .device/cli/jccl-cli.jar), PERF_MAX (1G),
# PERF_SHAPES ("2x2 4x1"), CHECK_SHAPES ("4:a,a,b,b 4:a,b,a,b 4:a,b,c,d 3:a,a,b 3:a,b,b"), CHECK_COLLS (all
# seven), CHECK_EXTRA (1: also bfloat16 and 1-slot all_reduce per shape), T (seconds per run, default 100). check runs 9 jobs per shape (JVM and GPU start each): with
# all five shapes it may not fit one 10-minute call; split it, e.g. CHECK_SHAPES="4:a,a,b,b 4:a,b,c,d".
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
DEV=.device
OUT=${OUT:-/tmp/gpu-hier-out}
T=${T:-100}
mkdir -p "$OUT"
dry=0
phases=()
for a in "$@"; do
    case "$a" in
        -n|--dry-run) dry=1 ;;
        check|kill|perf) phases+=("$a") ;;
        *) echo "gpu-hier: unknown phase '$a'; use check, kill, perf" >&2; exit 2 ;;
    esac
done
[ ${#phases[@]} -gt 0 ] || { echo "gpu-hier: no phase given; use check, kill, perf" >&2; exit 2; }

if [ "$dry" = 1 ]; then
    JAVA=java
else
    [ -f "$DEV/jre25.tar.xz" ] || { echo "gpu-hier: $DEV/jre25.tar.xz is missing: run scripts/gpu-prep.sh and carry $DEV" >&2; exit 2; }
    [ -x /tmp/jre25/bin/java ] || tar -xJf "$DEV/jre25.tar.xz" -C /tmp || exit 2
    export JAVA_HOME=/tmp/jre25 PATH=/tmp/jre25/bin:$PATH
    JAVA=/tmp/jre25/bin/java
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NCCL_DIR=$(python3 -c "import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])" 2>/dev/null || true)
if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/lib/libnccl.so.2" ]; then
    export JCCL_NCCL_LIBRARY=${JCCL_NCCL_LIBRARY:-$NCCL_DIR/lib/libnccl.so.2}
    export LD_LIBRARY_PATH="$NCCL_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
JOPTS="--enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -XX:+UseParallelGC -Xss1m"
CLI=${CLI:-$DEV/cli/jccl-cli.jar}
export JCCL_DEBUG=${JCCL_DEBUG:-INFO} JCCL_DEBUG_SUBSYS=${JCCL_DEBUG_SUBSYS:-INIT}

# run NP LOG ENV... -- PERF ARGS: one jccl run job of NP processes (each process: env, then perf on its GPU)
run() {
    local np=$1 log=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "### np=$np ${envs[*]} perf $*" | tee -a "$log"
    if [ "$dry" = 1 ]; then return 0; fi
    env "${envs[@]}" timeout -k 5 "$T" "$JAVA" $JOPTS -jar "$CLI" run -np "$np" --bind-to none --timeout $((T - 5)) -- \
        org.jccl.cli.JcclCli perf "$@" >> "$log" 2>&1
    local rc=$?
    echo "### rc=$rc" >> "$log"
    grep -E '# *Out of bounds values|# *Avg bus bandwidth|ERROR|Exception' "$log" | tail -n 3
    return $rc
}

phase_check() {
    local log=$OUT/hier-check.txt worst=0
    : > "$log"
    local colls=${CHECK_COLLS:-"all_reduce reduce_scatter all_gather broadcast reduce alltoall sendrecv"}
    local shapes=${CHECK_SHAPES:-"4:a,a,b,b 4:a,b,a,b 4:a,b,c,d 3:a,a,b 3:a,b,b"}
    for shape in $shapes; do
        shape=${shape/:/ }
        set -- $shape
        for c in $colls; do
            run "$1" "$log" JCCL_HOSTID="$2" JCCL_CUDA_HIER_CHUNK=256K -- "$c" --device cuda -b 12 -e 16M -f 3 -c 1 -w 1 -n 2 || worst=1
        done
        [ "${CHECK_EXTRA:-1}" = 1 ] || continue
        run "$1" "$log" JCCL_HOSTID="$2" -- all_reduce --device cuda -d bfloat16 -b 8 -e 16M -f 8 -c 1 -w 1 -n 2 || worst=1
        run "$1" "$log" JCCL_HOSTID="$2" JCCL_CUDA_HIER_SLOTS=1 -- all_reduce --device cuda -b 1M -e 32M -f 4 -c 1 -w 1 -n 2 || worst=1
    done
    echo "check: wrong values per run (all must be 0):"; grep -cE 'Out of bounds values *: *0' "$log"
    grep -E 'Out of bounds values *: *[1-9]' "$log" && worst=1
    grep -m 4 'GPU communicator: rank' "$log"
    return $worst
}

phase_kill() {
    local log=$OUT/hier-kill.txt
    : > "$log"
    echo "### 2x2 all_reduce 1G loop; rank 3 killed after 25 s; JCCL_PEER_TIMEOUT=10" | tee -a "$log"
    [ "$dry" = 1 ] && return 0
    rm -f /tmp/gpu-hier-pid.*
    local t0=$SECONDS
    JCCL_HOSTID=a,a,b,b JCCL_PEER_TIMEOUT=10 timeout -k 5 120 "$JAVA" $JOPTS -jar "$CLI" run -np 4 --bind-to none --timeout 110 -- \
        sh -c '"$0" '"$JOPTS"' -cp "$1" org.jccl.cli.JcclCli perf all_reduce --device cuda -b 1G -e 1G -w 2 -n 1000 -c 0 &
               echo $! > /tmp/gpu-hier-pid.$JCCL_RANK; wait $!; rc=$?; [ "$JCCL_RANK" = 3 ] && sleep 60; exit $rc' "$JAVA" "$CLI" \
        >> "$log" 2>&1 &
    local job=$!
    sleep 25
    local victim
    victim=$(cat /tmp/gpu-hier-pid.3 2>/dev/null)
    echo "### $(date +%T) killing rank 3 (pid ${victim:-?})" >> "$log"
    [ -n "$victim" ] && kill -9 "$victim"
    local k=$SECONDS
    wait $job
    echo "### job ended $((SECONDS - k)) s after the kill (rc=$?)" >> "$log"
    grep -E 'failed|PeerFailed|rank 3' "$log" | grep -v '^###' | head -n 12
    tail -n 1 "$log"
    # Verdict: every GPU communicator's failure names the victim as rank 3 (world numbering), never another peer.
    local lines named
    lines=$(grep -cE 'GPU [A-Za-z]+ across hosts failed' "$log")
    named=$(grep -E 'GPU [A-Za-z]+ across hosts failed' "$log" | sed -E 's/^\[[0-9]+\] jccl perf: rank [0-9]+: rank [0-9]+: //' \
        | grep -E 'failed: .*rank 3\b' | grep -cvE 'failed: [^(]*\brank [012] \(host')
    echo "kill: $lines GPU failure line(s), $named naming rank 3 and no other peer (all must)" | tee -a "$log"
    [ "$lines" -gt 0 ] && [ "$lines" = "$named" ]
}

phase_perf() {
    local log=$OUT/hier-perf.txt max=${PERF_MAX:-1G}
    : > "$log"
    for shape in ${PERF_SHAPES:-"2x2 4x1"}; do
        local ids per
        if [ "$shape" = 2x2 ]; then ids=a,a,b,b; per=2; else ids=a,b,c,d; per=1; fi
        local P=(all_reduce --device cuda -b 8 -e "$max" -f 4 -w 5 -n 20 -c 0)
        run 4 "$log" JCCL_HOSTID=$ids -- "${P[@]}"
        run 4 "$log" JCCL_HOSTID=$ids JCCL_CUDA_HIER=0 -- "${P[@]}"
        # jccl with as many sockets per cross-host peer as NCCL's 4x4 run below (stream threads)
        [ "${PERF_JCCL_4X4:-1}" = 1 ] && run 4 "$log" JCCL_HOSTID=$ids JCCL_SOCKET_NTHREADS=4 JCCL_NSOCKS_PERTHREAD=4 -- "${P[@]}"
        # NCCL: NCCL_HOSTID per process (rank r on host r/per), through the same jccl perf driver
        for socks in default 4x4; do
            local extra=""
            [ $socks = 4x4 ] && extra="NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4"
            echo "### $shape NCCL $socks" | tee -a "$log"
            [ "$dry" = 1 ] && continue
            timeout -k 5 "$T" "$JAVA" $JOPTS -jar "$CLI" run -np 4 --bind-to none --timeout $((T - 5)) -- sh -c \
                'export NCCL_HOSTID=h$((JCCL_RANK/'$per')) NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET '"$extra"'; exec '"$JAVA $JOPTS"' -cp '"$CLI"' org.jccl.cli.JcclCli perf all_reduce --backend nccl --device cuda -b 8 -e '"$max"' -f 4 -w 5 -n 20 -c 0' \
                >> "$log" 2>&1
            echo "### rc=$?" >> "$log"
            grep -m 2 -E 'via NET/Socket|via P2P' "$log"
        done
    done
    grep -E '^### |^ *[0-9]+ ' "$log" | head -n 200 > "$OUT/hier-perf-tables.txt"
}

worst=0
for p in "${phases[@]}"; do
    echo "gpu-hier: phase $p"
    "phase_$p" || worst=1
done
exit $worst
