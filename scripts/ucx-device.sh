#!/usr/bin/env bash
# Debian's UCX carried as files to the lent GPU machine (which has no UCX), for the UCX rows of a GPU sitting.
#
#   scripts/ucx-device.sh pack     HERE (after scripts/gpu-prep.sh): copies libucp/libuct/libucs/libucm, UCX's module
#                                  libraries, libnuma, ucx_perftest (+ libgomp) and ucx_info into .device/ucx/{lib,bin}
#   scripts/ucx-device.sh check    THERE (carry .device): jccl loads UCX from .device/ucx (JCCL_UCX_HOME, LD_LIBRARY_PATH),
#                                  prints `jccl topo`'s UCX line, then runs the conformance check of collectives between
#                                  host identities a,b over UCX tcp (CollectiveCheck, 2 ranks under jccl run)
#   scripts/ucx-device.sh perf     THERE: scripts/ucx-perf.sh with the carried ucx_perftest and jccl
#
# This UCX is Debian 12's 1.13.1 without CUDA: GPU buffers are staged (the UCX INFO line says so); it needs
# GLIBC >= 2.34 on the GPU machine. Its tcp and shared-memory transports are what runs there (no IB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
dev=.device
mode=${1:-}

case "$mode" in
pack)
    libdir=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libucp.so.0 /{print $NF; exit}')")")
    [ -f "$libdir/libucp.so.0" ] || { echo "ucx-device: libucp.so.0 not found: apt-get install libucx0" >&2; exit 1; }
    command -v ucx_perftest >/dev/null || { echo "ucx-device: ucx_perftest not found: apt-get install ucx-utils" >&2; exit 1; }
    rm -rf "$dev/ucx"
    mkdir -p "$dev/ucx/lib" "$dev/ucx/bin"
    for l in libucp.so.0 libuct.so.0 libucs.so.0 libucm.so.0 libucs_signal.so.0 libuct_cma.so.0 libnuma.so.1 libgomp.so.1; do
        f=$(readlink -f "$libdir/$l" 2>/dev/null || true)
        [ -f "$f" ] && cp "$f" "$dev/ucx/lib/$l"
    done
    if [ -d "$libdir/ucx" ]; then # the transport modules (cma; ib and rdmacm need libibverbs, absent there: UCX skips them)
        mkdir -p "$dev/ucx/lib/ucx"
        cp -L "$libdir"/ucx/*.so.0 "$dev/ucx/lib/ucx/"
    fi
    cp "$(command -v ucx_perftest)" "$dev/ucx/bin/"
    command -v ucx_info >/dev/null && cp "$(command -v ucx_info)" "$dev/ucx/bin/"
    du -sh "$dev/ucx"
    [ -x "$dev/ucx/bin/ucx_info" ] && LD_LIBRARY_PATH="$dev/ucx/lib" "$dev/ucx/bin/ucx_info" -v | head -n 1
    ;;
check | perf)
    [ -d "$dev/ucx/lib" ] || { echo "ucx-device: $dev/ucx missing: run scripts/ucx-device.sh pack on the CPU machine and carry $dev" >&2; exit 2; }
    if [ ! -x /tmp/jre25/bin/java ]; then
        tar -xJf "$dev/jre25.tar.xz" -C /tmp
    fi
    java=/tmp/jre25/bin/java
    export JCCL_UCX_HOME="$root/$dev/ucx" LD_LIBRARY_PATH="$root/$dev/ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ -d "$root/$dev/ucx/lib/ucx" ] && export UCX_MODULE_DIR="$root/$dev/ucx/lib/ucx"
    jccl=("$java" --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -jar "$dev/cli/jccl-cli.jar")
    if [ "$mode" = check ]; then
        "${jccl[@]}" topo | grep '^UCX'
        JCCL_NET=UCX JCCL_HOSTID=a,b JCCL_UCX_TLS=tcp JCCL_DEBUG=INFO JCCL_DEBUG_SUBSYS=INIT \
            "${jccl[@]}" run -np 2 --bind-to none --cp "$dev/cli/jccl-examples.jar" org.jccl.examples.CollectiveCheck 2>&1 \
            | grep -E 'via UCX|UCX 1\.|CHECK OK|FAIL|Exception'
    else
        JCCL="${jccl[*]}" UCX_PERFTEST="$dev/ucx/bin/ucx_perftest" scripts/ucx-perf.sh "${@:2}"
    fi
    ;;
*)
    echo "usage: scripts/ucx-device.sh pack|check|perf [UCX_TLS ...]" >&2
    exit 2
    ;;
esac
