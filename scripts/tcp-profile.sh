#!/usr/bin/env bash
# Where jccl's TCP loses against loopback with many sockets (issue 20): on a host with CPUs to spare
# (the lent GPU machine: 64), 2 ranks with host identities a,b (so the pair talks TCP on lo), stream
# threads on. Separates the transport (sendrecv) from the all-reduce (reduction + algorithm), varies
# the slice size, the thread and socket counts, and records one 64 MB all-reduce with JFR.
#
# Usage: scripts/tcp-profile.sh [PHASE...]    PHASE: probe sweep jfr   (default: all three)
#   probe  TcpStreamProbe oneway and bidir with 16 streams (what loopback carries)
#   sweep  sendrecv and all_reduce 16M..256M: 1x1, 4x4, 8x2, 16x1 sockets; all_reduce 4x4 with
#          JCCL_CHUNK_SIZE 2M and 8M
#   jfr    all_reduce 64M, 4x4, -n 200, each rank under JFR (profile settings)  -> $OUT/jfr-r*.jfr
# Environment: OUT (default /tmp/tcp-profile), DEV (.device), CLI, SIZES ("16M 64M 256M"), N (iterations, 20).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
DEV=${DEV:-.device}
OUT=${OUT:-/tmp/tcp-profile}
mkdir -p "$OUT"
if [ -f "$DEV/jre25.tar.xz" ]; then
    [ -x /tmp/jre25/bin/java ] || tar -xJf "$DEV/jre25.tar.xz" -C /tmp || exit 2
    JAVA=/tmp/jre25/bin/java
    CLI=${CLI:-$DEV/cli/jccl-cli.jar}
else
    . bin/jdk25.sh
    jccl_find_jdk25 >/dev/null || exit 2
    JAVA=$JAVA_HOME/bin/java
    CLI=${CLI:-jccl-cli/target/jccl-cli.jar}
fi
JOPTS=(--enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -XX:+UseParallelGC)
SIZES=${SIZES:-"16M 64M 256M"}
N=${N:-20}
min=${SIZES%% *}
max=${SIZES##* }
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(probe sweep jfr)
log="$OUT/tcp-profile.txt"
echo "# tcp-profile $(date -u +%FT%TZ) on $(hostname): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $CLI" | tee -a "$log"

jccl() { # T S COLL [ENV...] -- one perf run, prints "coll TxS env: size busbw(out) busbw(in) ..." lines
    local t=$1 s=$2 coll=$3
    shift 3
    local out
    out=$(env JCCL_HOSTID=a,b JCCL_SOCKET_IFNAME=lo JCCL_SOCKET_NTHREADS="$t" JCCL_NSOCKS_PERTHREAD="$s" JCCL_SOCKET_OFFLOAD=1 "$@" \
        timeout -k 10 300 "$JAVA" "${JOPTS[@]}" -jar "$CLI" perf "$coll" -np 2 --bind-to none -b "$min" -e "$max" -f 4 -n "$N" -c 0 2>&1)
    echo "$out" | awk -v tag="$coll ${t}x$s $*" '/^ +[0-9]+ +[0-9]+ +float/ { printf "%-48s %10s  time %9s us  busbw %6s GB/s (in place %6s)\n", tag, $1, $6, $8, $12 }'
    echo "$out" | grep -i "error\|exception\|failed" | head -n 3
}

for phase in "${phases[@]}"; do
    case "$phase" in
        probe)
            for mode in oneway bidir; do
                echo "probe $mode 16: $("$JAVA" -cp "$CLI" org.jccl.cli.perf.TcpStreamProbe $mode 16 3 127.0.0.1 | tail -n 1)" | tee -a "$log"
            done
            ;;
        sweep)
            for ts in "1 1" "4 4" "8 2" "16 1"; do
                jccl $ts sendrecv | tee -a "$log"
                jccl $ts all_reduce | tee -a "$log"
            done
            for c in 2M 8M; do
                jccl 4 4 all_reduce JCCL_CHUNK_SIZE=$c | tee -a "$log"
            done
            ;;
        jfr)
            # Each rank records into its own file (%p: its pid); profile settings sample every 10-20 ms.
            env JCCL_HOSTID=a,b JCCL_SOCKET_IFNAME=lo JCCL_SOCKET_NTHREADS=4 JCCL_NSOCKS_PERTHREAD=4 JCCL_SOCKET_OFFLOAD=1 \
                JAVA_TOOL_OPTIONS="-XX:StartFlightRecording=settings=profile,filename=$OUT/jfr-r%p.jfr" \
                timeout -k 10 300 "$JAVA" "${JOPTS[@]}" -jar "$CLI" perf all_reduce -np 2 --bind-to none -b 64M -e 64M -n 200 -c 0 \
                > "$OUT/jfr-run.txt" 2>&1
            grep -E "^ +[0-9]+" "$OUT/jfr-run.txt" | tee -a "$log"
            ls -la "$OUT"/*.jfr | tee -a "$log"
            ;;
        *) echo "tcp-profile: unknown phase $phase" >&2; exit 2 ;;
    esac
done
echo "# done $(date -u +%FT%TZ)" | tee -a "$log"
