#!/usr/bin/env bash
# What loopback TCP carries with N streams beside what jccl's TCP makes of it: for each N, plain NIO
# streams (TcpStreamProbe: one way, and both ways at once) and jccl's 2-rank all_reduce between two
# host identities (JCCL_HOSTID=a,b, so the pair talks TCP) with N sockets per peer, then the ratio
# busbw / loopback. Any Linux box: with the packed runtime (.device from scripts/gpu-prep.sh) or a
# checkout built with ./mvnw install.
#
# Usage: scripts/tcp-ceiling.sh [N ...]          (default: 1 4 16)
# Environment:
#   DEV=.device        packed runtime (jre25.tar.xz, cli/); when absent, the checkout's jars and JDK 25
#   CLI=JAR            the jccl-cli jar to measure (another build: compare in the same sitting)
#   SIZES="16M 64M 256M"  all_reduce sizes; ITERS=20; SECONDS_PROBE=3
#   THREADS_MAX=4      N streams = min(N, THREADS_MAX) stream threads x N/threads sockets each
#   OFFLOAD="0 1"      JCCL_SOCKET_OFFLOAD values to run (1: stream threads, 0: the operation thread)
#   ALGOS="auto ring"  auto: the tuner's pick; ring: JCCL_ALGO=allreduce:ring (reduction overlaps the transfer)
#   BIND=none          jccl perf --bind-to (GPU hosts: none; a rank pinned to one CPU cannot run stream threads)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
streams=("$@")
[ ${#streams[@]} -gt 0 ] || streams=(1 4 16)
DEV=${DEV:-.device}
if [ -f "$DEV/jre25.tar.xz" ] && [ -f "$DEV/cli/jccl-cli.jar" ]; then
    [ -x /tmp/jre25/bin/java ] || tar -xJf "$DEV/jre25.tar.xz" -C /tmp
    JAVA=/tmp/jre25/bin/java
    CLI=${CLI:-$DEV/cli/jccl-cli.jar}
else
    # shellcheck source=bin/jdk25.sh
    . bin/jdk25.sh
    jccl_find_jdk25 || exit 1
    JAVA=$JAVA_HOME/bin/java
    CLI=${CLI:-jccl-cli/target/jccl-cli.jar}
fi
[ -f "$CLI" ] || { echo "tcp-ceiling: $CLI missing: build first (./mvnw -B -DskipTests install) or run scripts/gpu-prep.sh" >&2; exit 2; }
JOPTS=(--enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -XX:+UseParallelGC)
SIZES=${SIZES:-"16M 64M 256M"}
ITERS=${ITERS:-20}
SECONDS_PROBE=${SECONDS_PROBE:-3}
THREADS_MAX=${THREADS_MAX:-4}
OFFLOAD=${OFFLOAD:-"0 1"}
ALGOS=${ALGOS:-"auto ring"}
BIND=${BIND:-none}
lo=${ADDR:-127.0.0.1}
min=${SIZES%% *}
max=${SIZES##* }

echo "# tcp-ceiling $(date -u +%FT%TZ) on $(hostname): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $CLI"
echo "# loopback: java -cp $CLI org.jccl.cli.perf.TcpStreamProbe oneway|bidir N $SECONDS_PROBE $lo"
echo "# jccl: JCCL_HOSTID=a,b JCCL_SOCKET_IFNAME=lo JCCL_SOCKET_NTHREADS=T JCCL_NSOCKS_PERTHREAD=S JCCL_SOCKET_OFFLOAD=O \\"
echo "#       java -jar $CLI perf all_reduce -np 2 --bind-to $BIND -b $min -e $max -f 4 -n $ITERS   (busbw out of place, GB/s)"
printf '| N | loopback one way | loopback each way (bidir) | T x S | offload | algo | bytes | jccl busbw | / one way | / each way |\n'
printf '|---:|---:|---:|---|---:|---|---:|---:|---:|---:|\n'
for n in "${streams[@]}"; do
    one=$("$JAVA" -cp "$CLI" org.jccl.cli.perf.TcpStreamProbe oneway "$n" "$SECONDS_PROBE" "$lo" | sed -n 's/.*GB\/s=\([0-9.]*\).*/\1/p')
    both=$("$JAVA" -cp "$CLI" org.jccl.cli.perf.TcpStreamProbe bidir "$n" "$SECONDS_PROBE" "$lo" | sed -n 's/.*GB\/s=\([0-9.]*\).*/\1/p')
    t=$(( n < THREADS_MAX ? n : THREADS_MAX ))
    s=$(( n / t ))
    for off in $OFFLOAD; do
        for algo in $ALGOS; do
            env=(JCCL_HOSTID=a,b JCCL_SOCKET_IFNAME=lo JCCL_SOCKET_NTHREADS=$t JCCL_NSOCKS_PERTHREAD=$s JCCL_SOCKET_OFFLOAD=$off)
            [ "$algo" = auto ] || env+=(JCCL_ALGO=allreduce:$algo)
            out=$(env "${env[@]}" timeout -k 10 600 "$JAVA" "${JOPTS[@]}" -jar "$CLI" perf all_reduce -np 2 --bind-to "$BIND" \
                -b "$min" -e "$max" -f 4 -n "$ITERS" 2>&1) || { echo "| $n | $one | $both | ${t}x$s | $off | $algo | failed: $(echo "$out" | tail -n 2 | tr '\n' ' ') |"; continue; }
            echo "$out" | awk -v n="$n" -v one="$one" -v both="$both" -v ts="${t}x$s" -v off="$off" -v algo="$algo" '
                /^ +[0-9]+ +[0-9]+ +float/ { bw = $8; printf "| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n", n, one, both, ts, off, algo, $1, bw, bw / one, bw / both }'
        done
    done
done
echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
