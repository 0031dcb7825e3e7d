#!/usr/bin/env bash
# Self-checking run of jccl under a real torchrun, for a machine with a newer torch than CI's Debian
# 1.13 (e.g. the lent GPU machine's torch 2.x): no GPU is used (host memory only) and no JCCL
# variable is set. Needs python3 with torch, and Java + jars: the bundle scripts/gpu-prep.sh packs
# (.device/jre25.tar.xz, .device/cli/), or, on a development machine, JAVA=<java 25> and the
# built */target jars.
#
#   scripts/torchrun-check.sh                 every case below; logs to $OUT (or ./torchrun-check-logs)
#   CASES="static standalone" scripts/torchrun-check.sh
#
# Cases (each runs org.jccl.examples.CollectiveCheck, every collective, under torchrun --no_python):
#   static      torchrun --nproc_per_node 2: the agent's store at MASTER_PORT carries rank 0's address
#               (jccl must never bind MASTER_PORT; before this fix: "Address already in use")
#   standalone  torchrun --standalone --nproc_per_node 2 (c10d; newer torch serves its store from the agent too)
#   nnodes      two torchrun agents on this host as two nodes (--nnodes 2, c10d rendezvous), 2 ranks each
#   classic     'static' with USE_LIBUV=0 (newer torch: the classic TCPStore backend instead of the libuv one)
# Each case passes when torchrun exits 0 and rank 0 prints "CHECK OK <n> checks"; the log line
# "torch store dialect ..." says which protocol dialect jccl found (LEGACY: torch 1.x and early 2.x;
# VALIDATED: VALIDATE handshake, no PING; VALIDATED_PING: current torch). Exit code: 0 all passed,
# 1 a case failed, 2 setup.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
OUT=${OUT:-$root/torchrun-check-logs}
mkdir -p "$OUT"
CASES=${CASES:-static standalone nnodes classic}
PY=${PYTHON:-python3}

log() { echo "torchrun-check: $*" | tee -a "$OUT/summary.txt"; }

if ! torch_version=$("$PY" -c 'import torch, torch.distributed.run; print(torch.__version__)' 2>"$OUT/python.err"); then
    echo "torchrun-check: $PY cannot import torch.distributed.run (set PYTHON=...): $(tail -n 1 "$OUT/python.err")" >&2
    exit 2
fi

# Java and the class path: the packed bundle first, else the build tree.
if [ -z "${JAVA:-}" ] && [ -f .device/jre25.tar.xz ]; then
    tar -xJf .device/jre25.tar.xz -C /tmp || { echo "torchrun-check: cannot unpack .device/jre25.tar.xz" >&2; exit 2; }
    JAVA=/tmp/jre25/bin/java
fi
JAVA=${JAVA:-java}
if [ -f .device/cli/jccl-cli.jar ] && [ -f .device/cli/jccl-examples.jar ]; then
    CP=".device/cli/jccl-cli.jar:.device/cli/jccl-examples.jar:$(ls .device/cli/lib/*.jar | paste -sd:)"
else
    CP="$(ls jccl-core/target/jccl-core-*.jar examples/target/jccl-examples-*.jar 2>/dev/null | grep -v -e sources -e javadoc -e tests | paste -sd:)"
fi
[ -n "$CP" ] || { echo "torchrun-check: no jars: run scripts/gpu-prep.sh (or build) first" >&2; exit 2; }
if ! "$JAVA" -version 2>&1 | grep -q 'version "25'; then
    echo "torchrun-check: $JAVA is not Java 25: $("$JAVA" -version 2>&1 | head -n 1)" >&2
    exit 2
fi
CHECK=("$(command -v "$JAVA" || echo "$JAVA")" --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -cp "$CP"
       org.jccl.examples.CollectiveCheck --counts 0,7,1000,65537 --types float32,bfloat16,int64 --reduce-ops sum,max,avg --verbose)
# torch 1.13 under Python 3.11 crashes with its default --redirects 0; 1 works on every version.
TR=("$PY" -m torch.distributed.run --redirects 1 --tee 1)

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The job must not see any JCCL variable (or another launcher's).
for v in $(env | grep -oE '^(JCCL_[A-Z_]+|NCCL_COMM_ID|MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE|LOCAL_RANK)=' | tr -d =); do
    unset "$v"
done
export JCCL_DEBUG=INFO JCCL_DEBUG_SUBSYS=BOOTSTRAP   # the only jccl settings: log lines to check, no behaviour

log "torch $torch_version, python $("$PY" -c 'import sys; print(sys.version.split()[0])'), $("$JAVA" -version 2>&1 | head -n 1), host $(hostname)"
failed=0
# judge NAME RC START: PASS when torchrun exited 0 and rank 0 printed CHECK OK in $OUT/NAME.log.
judge() {
    local name=$1 rc=$2 t0=$3
    local logf="$OUT/$name.log"
    local ok dialect
    ok=$(grep -cE '^(\[default[0-9]+\]:)?CHECK OK [0-9]+ checks' "$logf")
    dialect=$(grep -m1 -oE 'torch store dialect [A-Z_]+' "$logf" || echo "no torch store (rank 0 bound MASTER_PORT)")
    if [ "$rc" -eq 0 ] && [ "$ok" -eq 1 ]; then
        log "PASS $name ($((SECONDS - t0)) s; $dialect; $(grep -m1 -oE 'CHECK OK [0-9]+ checks' "$logf"))"
    else
        log "FAIL $name (exit $rc, CHECK OK lines: $ok, expected 1; $dialect): see $logf"
        grep -E 'CHECK (ERROR|FAILED)|Exception|Error' "$logf" | head -n 5 | sed 's/^/    /' | tee -a "$OUT/summary.txt"
        failed=1
    fi
}

run_case() {
    local name=$1; shift
    local t0=$SECONDS
    timeout -k 10 240 "$@" >"$OUT/$name.log" 2>&1
    judge "$name" $? "$t0"
}

for c in $CASES; do
    case $c in
        static) run_case static "${TR[@]}" --nproc_per_node 2 --master_port "$(free_port)" --no_python "${CHECK[@]}" ;;
        standalone) run_case standalone "${TR[@]}" --standalone --nproc_per_node 2 --no_python "${CHECK[@]}" ;;
        nnodes)
            ep=127.0.0.1:$(free_port)
            t0=$SECONDS
            node=("${TR[@]}" --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint "$ep" --rdzv_id jccl-check --no_python "${CHECK[@]}")
            timeout -k 10 240 "${node[@]}" >"$OUT/nnodes-a.log" 2>&1 &
            a=$!
            timeout -k 10 240 "${node[@]}" >"$OUT/nnodes-b.log" 2>&1 &
            b=$!
            wait "$a"; rca=$?
            wait "$b"; rcb=$?
            cat "$OUT/nnodes-a.log" "$OUT/nnodes-b.log" > "$OUT/nnodes.log"
            judge nnodes $((rca | rcb)) "$t0"
            ;;
        classic) USE_LIBUV=0 run_case classic "${TR[@]}" --nproc_per_node 2 --master_port "$(free_port)" --no_python "${CHECK[@]}" ;;
        *) log "unknown case $c"; failed=1 ;;
    esac
done
[ "$failed" = 0 ] && log "all passed" || log "some cases FAILED"
exit "$failed"
