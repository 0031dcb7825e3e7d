#!/usr/bin/env bash
# One sitting of UCX's own ucx_perftest beside jccl over the UCX transport, same UCX transport, same host (loopback),
# for issue 20's goals: jccl send/recv >= 0.9x tag_bw from 64 KiB, <= 1.2x tag_lat at 8 B; all_reduce between two
# host identities over UCX (tcp) at least as fast as over jccl's own TCP. Run it on a quiet machine (nothing else
# building); it takes a few minutes. Needs ucx-utils (ucx_perftest) and a built bin/jccl.
#
#   scripts/ucx-perf.sh [tcp|posix,cma,self ...]     (default: tcp and posix,cma,self)
#
# JCCL="java ... -jar jccl-cli.jar" and UCX_PERFTEST=/path/ucx_perftest replace bin/jccl and the ucx_perftest on PATH
# (scripts/ucx-device.sh run sets both on the GPU machine).
#
# What is compared:
# - ucx_perftest -e (endpoints in the peer-failure error mode, as jccl's): tag_lat (one-way latency, p50 and avg) at
#   8 B and tag_bw (MB/s) at 64 KiB, 1 MiB and 16 MiB, server and client on 127.0.0.1; each beside jccl's send/recv
#   in the same shape (org.jccl.cli.perf.P2pProbe under jccl run -np 2: ping-pong, or a one-way stream of 32 in flight);
# - jccl perf sendrecv -np 2 with JCCL_NET=UCX JCCL_HOSTID=a,b (the two ranks are "different hosts", so the pair
#   goes over UCX) and JCCL_UCX_TLS=<tls>: nccl-tests' sendrecv (each rank sends to one peer and receives from it at
#   once), median time per operation (perftest tag_lat reports p50); its algbw is bytes / time per direction. Note the shapes differ: perftest's tag_bw streams one
#   direction with many messages in flight, jccl's sendrecv moves one message each way per operation.
# - all_reduce -np 2, JCCL_HOSTID=a,b, over UCX (tcp) and over jccl's TCP (JCCL_NET=Socket), --timing median.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
perftest_bin=${UCX_PERFTEST:-ucx_perftest}
read -r -a jccl <<< "${JCCL:-bin/jccl}"
command -v "$perftest_bin" >/dev/null || { echo "ucx-perf: $perftest_bin missing: apt-get install ucx-utils" >&2; exit 1; }
tls_list=("$@")
[ ${#tls_list[@]} -gt 0 ] || tls_list=(tcp posix,cma,self)
port=$((20000 + RANDOM % 20000))

perftest() { # TLS TEST SIZE ITERS WARMUP -> the "Final:" line
    local tls=$1 test=$2 size=$3 n=$4 w=$5
    # -e (PEER error mode): UCX 1.13 offers posix/sysv to such endpoints only with MM_ERROR_HANDLING=y, which jccl's
    # transport sets too (docs/UCX.md); without it perftest over posix,cma,self fails with "Destination is unreachable"
    local mm=(env UCX_TLS="$tls" UCX_MM_ERROR_HANDLING=y)
    "${mm[@]}" "$perftest_bin" -p "$port" -e >/dev/null 2>&1 &
    local server=$!
    sleep 1
    "${mm[@]}" timeout 300 "$perftest_bin" 127.0.0.1 -p "$port" -e -t "$test" -s "$size" -n "$n" -w "$w" 2>/dev/null | grep '^Final:' || echo "Final: failed"
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    port=$((port + 1))
}

echo "# $(date -u +%FT%TZ) $(hostname) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $(ucx_info -v 2>/dev/null | head -n 1)"
for tls in "${tls_list[@]}"; do
    echo "## UCX_TLS=$tls: ucx_perftest -e (Final: iterations, p50 us, avg us, overall us, avg MB/s, overall MB/s, msg/s avg, overall)"
    # Each perftest line is followed by jccl's send/recv in the same shape (P2pProbe: ping-pong, or a one-way
    # stream with perftest's window of 32), through jccl's public API over the same UCX transport.
    # Iterations enough for a second or more per line: a few milliseconds (2000 x 64 KiB) measured jccl's stream 2-3x
    # below its steady rate on 2 cores, and perftest's own figures swing as much.
    for t in "tag_lat lat 8 200000 2000" "tag_bw bw 65536 100000 2000" "tag_bw bw 1048576 10000 200" "tag_bw bw 16777216 600 20"; do
        set -- $t
        echo "$1 $3 B: perftest $(perftest "$tls" "$1" "$3" "$4" "$5")"
        echo "$1 $3 B: jccl     $(JCCL_NET=UCX JCCL_HOSTID=a,b JCCL_UCX_TLS=$tls "${jccl[@]}" run -np 2 -- org.jccl.cli.perf.P2pProbe "$2" "$3" "$4" 2>&1 \
            | grep -E '^\[0\] (lat|bw) ' | sed 's/^\[0\] //' || echo failed)"
    done
    echo "## jccl perf sendrecv over UCX ($tls), JCCL_HOSTID=a,b"
    JCCL_NET=UCX JCCL_HOSTID=a,b JCCL_UCX_TLS=$tls "${jccl[@]}" perf sendrecv -np 2 -b 8 -e 16M -f 8 -n 200 -w 50 --jit-warmup 2000 --timing median \
        | grep -E '^ +[0-9]|^#  *size'
done
echo "## all_reduce -np 2 between host identities a,b: UCX (tcp), then jccl's TCP"
JCCL_NET=UCX JCCL_HOSTID=a,b JCCL_UCX_TLS=tcp "${jccl[@]}" perf all_reduce -np 2 -b 8 -e 64M -f 8 -n 50 -w 10 --timing median \
    | grep -E '^ +[0-9]|^#  *size'
JCCL_NET=Socket JCCL_HOSTID=a,b "${jccl[@]}" perf all_reduce -np 2 -b 8 -e 64M -f 8 -n 50 -w 10 --timing median \
    | grep -E '^ +[0-9]|^#  *size'
