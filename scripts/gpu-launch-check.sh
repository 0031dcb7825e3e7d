#!/usr/bin/env bash
# GPU per process and CPU binding (issue 18, items 1 and 2), ON the lent GPU machine (2+ GPUs; written
# for 4), from the repository root with .device/ made by scripts/gpu-prep.sh carried along.
# Self-checking: every check prints PASS or FAIL with what it saw; the exit code is 0 only when all pass.
#
#   scripts/gpu-launch-check.sh [--dry-run] PHASE...     PHASE: mapping perf (or all)
#
#   mapping  (~3-4 min) -> $OUT/mapping.txt
#            GpuPerProcessTest (JUnit: the rule against CUDA's enumeration, two threads on one GPU,
#            two GPUs reduce); then processes of jccl run, each with its own environment:
#            - one visible GPU per process by index (CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK) and by UUID
#              prefix: jccl perf all_reduce --device cuda -c 1 right, each rank on its own GPU
#            - a reordered list (CUDA_VISIBLE_DEVICES=N-1,...,0 for all): local rank r on GPU N-1-r
#            - two ranks on one GPU (both CUDA_VISIBLE_DEVICES=<last>), jccl and NCCL backends: BOTH
#              processes fail naming both ranks, the GPU's bus id and UUID, each CUDA_VISIBLE_DEVICES
#            - jccl doctor's answer for each layout (--cuda-visible-devices-per-rank, a reordered list,
#              the shared GPU, and inside each rank of jccl run), agreeing with the runtime
#            - the default binding (--bind-to auto) of GPU ranks: each rank on more than one CPU,
#              the CPUs of its GPU's NUMA node (JCCL_DEBUG=INFO lines of the launcher)
#   perf     (~4-7 min) -> $OUT/perf.txt (tables), $OUT/perf-json.txt (the -J reports), $OUT/binding.txt
#            jccl perf all_reduce -np N --device cuda -b 8 -e 1G -f 4 with default flags, with
#            --bind-to none and with --backend nccl (default flags), interleaved over ROUNDS rounds;
#            binding.txt compares default against none at every size (best of the rounds) and
#            FAILs a size where default is slower by more than 10% + 3 us.
# Always: $OUT/env.txt (machine, GPUs, NUMA, bundle) and $OUT/summary.txt (printed last). At most 6 files.
#
# Suggested calls on 4x H200 (NCCL_NVLS_ENABLE=0 is exported here), one phase per call so that each
# fits the 10-minute limit (OUT differs per call only if you want both sets of files back):
#   scripts/gpu-launch-check.sh mapping
#   scripts/gpu-launch-check.sh perf
#
# Environment (all optional): OUT (default /tmp/gpu-launch-out), NGPUS (default: all), BUDGET seconds
# (default 570), ROUNDS perf rounds (default 2: default, none, nccl, none, default), MAXBYTES (default 1G),
# JRE (a Java 25 home to use instead of unpacking $DEV/jre25.tar.xz into /tmp/jre25).
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
DEV=.device
OUT=${OUT:-/tmp/gpu-launch-out}
BUDGET=${BUDGET:-570}
ROUNDS=${ROUNDS:-2}
MAXBYTES=${MAXBYTES:-1G}
start=$SECONDS

dry=0
phases=()
for a in "$@"; do
    case "$a" in
        -n|--dry-run) dry=1 ;;
        -h|--help) sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
        all) phases+=(mapping perf) ;;
        mapping|perf) phases+=("$a") ;;
        *) echo "gpu-launch-check: unknown phase '$a'; use mapping, perf or all (--help for more)" >&2; exit 2 ;;
    esac
done
[ ${#phases[@]} -gt 0 ] || { echo "gpu-launch-check: no phase given: mapping, perf or all" >&2; exit 2; }
mkdir -p "$OUT"

# ---------------------------------------------------------------- environment
if [ "$dry" = 1 ]; then
    JAVA=java
    NGPUS=${NGPUS:-4}
else
    [ -f "$DEV/jre25.tar.xz" ] || { echo "gpu-launch-check: $DEV/jre25.tar.xz is missing: run scripts/gpu-prep.sh and carry $DEV" >&2; exit 2; }
    JRE=${JRE:-/tmp/jre25}
    [ -x "$JRE/bin/java" ] || tar -xJf "$DEV/jre25.tar.xz" -C /tmp || { echo "gpu-launch-check: cannot unpack the JRE" >&2; exit 2; }
    JAVA=$JRE/bin/java
    NGPUS=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
fi
export JAVA_HOME=${JRE:-/tmp/jre25} PATH=${JRE:-/tmp/jre25}/bin:$PATH
# NVLink multicast (NVLS) is forbidden on these machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# nvidia-smi numbers GPUs in PCI order; make CUDA do the same so "GPU r" means one thing here.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
NCCL_DIR=$(python3 -c "import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])" 2>/dev/null || true)
if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/lib/libnccl.so.2" ]; then
    export JCCL_NCCL_LIBRARY=${JCCL_NCCL_LIBRARY:-$NCCL_DIR/lib/libnccl.so.2}
    export LD_LIBRARY_PATH="$NCCL_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
JOPTS=(--enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -XX:+UseParallelGC)
CLI="$DEV/cli/jccl-cli.jar"
JCCL=("$JAVA" "${JOPTS[@]}" -jar "$CLI")
# The same command as one string, for the sh -c of each rank.
JCCL_SH="$JAVA ${JOPTS[*]} -jar $CLI"
CONSOLE="$DEV/test/junit-platform-console-standalone.jar"
TEST_CP="$DEV/test/jccl-cuda.jar:$DEV/test/jccl-cuda-tests.jar:$DEV/test/jccl-core.jar"

# GPU r's bus id (bb:dd.f, lower case) and UUID, in nvidia-smi's (PCI) order.
BUS=() UUID=()
if [ "$dry" != 1 ]; then
    while IFS=, read -r idx bus uuid; do
        b=$(echo "$bus" | tr -d ' ' | tr 'A-F' 'a-f')
        BUS[idx]=${b: -7}
        UUID[idx]=$(echo "$uuid" | tr -d ' ')
    done < <(nvidia-smi --query-gpu=index,pci.bus_id,uuid --format=csv,noheader 2>/dev/null)
else
    for i in 0 1 2 3; do BUS[i]="1$i:00.0"; UUID[i]="GPU-0000000$i-aaaa-bbbb-cccc-dddddddddddd"; done
fi
LAST=$((NGPUS - 1))

{
    echo "# gpu-launch-check $(date -u +%FT%TZ) on $(hostname), phases: ${phases[*]}, NGPUS=$NGPUS"
    cat "$DEV/MANIFEST.txt" 2>/dev/null | head -n 3
    "$JAVA" -version 2>&1 | head -n 1
    echo "JCCL_NCCL_LIBRARY=${JCCL_NCCL_LIBRARY:-unset}"
    for i in "${!BUS[@]}"; do echo "GPU $i: bus ${BUS[i]} ${UUID[i]} numa_node $(cat /sys/bus/pci/devices/0000:${BUS[i]}/numa_node 2>/dev/null || echo '?')"; done
    for n in /sys/devices/system/node/node*; do [ -f "$n/cpulist" ] && echo "$(basename "$n"): CPUs $(cat "$n/cpulist")"; done
    echo "launcher's CPUs: $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
    nvidia-smi topo -m 2>&1
} > "$OUT/env.txt" 2>&1

FAILS=()
NPASS=0
LOG=/dev/null
check() { # check NAME CONDITION-RESULT(0/1) DETAIL
    if [ "$2" = 0 ]; then
        NPASS=$((NPASS + 1))
        echo "PASS  $1" | tee -a "$LOG"
    else
        FAILS+=("$1: $3")
        echo "FAIL  $1: $3" | tee -a "$LOG"
    fi
}
left() { echo $((BUDGET - 15 - (SECONDS - start))); }
run_limited() { # run_limited SECONDS FILE CMD... (output to FILE); returns the command's code, 124 on timeout
    local secs=$1 f=$2
    shift 2
    if [ "$dry" = 1 ]; then echo "[dry-run] timeout ${secs}s: $*" | tee -a "$f"; return 0; fi
    timeout -k 10 "$secs" "$@" > "$f" 2>&1
}
has() { grep -qF -- "$2" "$1"; }
# intersect LIST LIST: the CPUs in both sysfs lists ("0-31,64-95"), as a sysfs list.
intersect() {
    python3 -c '
import sys
def parse(s):
    out = set()
    for p in s.strip().split(","):
        if p:
            a, _, b = p.partition("-")
            out.update(range(int(a), int(b or a) + 1))
    return out
c = sorted(parse(sys.argv[1]) & parse(sys.argv[2]))
runs, i = [], 0
while i < len(c):
    j = i
    while j + 1 < len(c) and c[j + 1] == c[j] + 1:
        j += 1
    runs.append(str(c[i]) if i == j else "%d-%d" % (c[i], c[j]))
    i = j + 1
print(",".join(runs))' "$1" "$2"
}
# The line of a rank's output ("[r] ...") that contains TEXT, or nothing.
rank_line() { grep -F -- "[$2] " "$1" | grep -F -- "$3" | head -n 1; }

# ---------------------------------------------------------------- mapping
phase_mapping() {
    LOG="$OUT/mapping.txt"
    : > "$LOG"
    local tmp; tmp=$(mktemp -d)
    local n=$NGPUS perfargs="perf all_reduce --device cuda -b 8 -e 64M -f 8 -c 1 -w 2 -n 5 --jit-warmup 0"

    echo "## GpuPerProcessTest (JUnit)" >> "$LOG"
    run_limited 150 "$tmp/junit" "$JAVA" "${JOPTS[@]}" -jar "$CONSOLE" execute --disable-banner --disable-ansi-colors --details=tree \
        --class-path "$TEST_CP" --select-class org.jccl.cuda.GpuPerProcessTest
    local rc=$?
    cat "$tmp/junit" >> "$LOG"
    local okn; okn=$(grep -oE '[0-9]+ tests successful' "$tmp/junit" | grep -oE '^[0-9]+')
    check "GpuPerProcessTest" "$([ $rc = 0 ] && [ "${okn:-0}" -ge 4 ] || [ "$dry" = 1 ]; echo $?)" "rc=$rc, ${okn:-0} successful (4 expected)"

    # One visible GPU per process, by index and by UUID prefix; a reordered list.
    local layout envcmd
    for layout in index uuid reordered; do
        case $layout in
            index) envcmd='export CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK' ;;
            uuid) envcmd='eval "export CUDA_VISIBLE_DEVICES=\$UUID_$JCCL_LOCAL_RANK"' ;;
            reordered) envcmd="export CUDA_VISIBLE_DEVICES=$(seq -s, $LAST -1 0)" ;;
        esac
        echo "## layout $layout: jccl run -np $n -- sh -c '$envcmd; exec jccl $perfargs'" >> "$LOG"
        for i in $(seq 0 $LAST); do export "UUID_$i=${UUID[i]:0:16}"; done
        JCCL_DEBUG=INFO JCCL_DEBUG_SUBSYS=INIT run_limited 150 "$tmp/$layout" "${JCCL[@]}" run -np "$n" --timeout 140 -- \
            sh -c "$envcmd; exec $JCCL_SH $perfargs"
        rc=$?
        cat "$tmp/$layout" >> "$LOG"
        local bad=""
        [ $rc = 0 ] || bad+="rc=$rc; "
        has "$tmp/$layout" "Out of bounds values : 0 OK" || bad+="no '0 OK' footer; "
        local r want why line
        for r in $(seq 0 $LAST); do
            case $layout in
                index) want=${BUS[r]}; why="the only GPU this process sees (CUDA_VISIBLE_DEVICES=$r)" ;;
                uuid) want=${BUS[r]}; why="the only GPU this process sees (CUDA_VISIBLE_DEVICES=${UUID[r]:0:16})" ;;
                reordered) want=${BUS[LAST - r]}; why="by local rank $r of $n" ;;
            esac
            line=$(rank_line "$tmp/$layout" "$r" "jccl perf: rank $r of $n")
            echo "$line" | tr 'A-F' 'a-f' | grep -qF "$want" || bad+="rank $r not on bus $want ('${line:0:160}'); "
            echo "$line" | grep -qF "$why" || bad+="rank $r: not '$why'; "
            [ "$layout" = uuid ] && ! echo "$line" | grep -qF "${UUID[r]}" && bad+="rank $r: UUID ${UUID[r]} not named; "
            # The INIT line of the claims exchange names the same GPU.
            rank_line "$tmp/$layout" "$r" "(local rank $r of $n) -> GPU" | tr 'A-F' 'a-f' | grep -qF "$want" \
                || bad+="rank $r: no INIT line naming bus $want; "
        done
        [ "$dry" = 1 ] && bad=""
        check "runtime: $layout layout, each rank on its GPU, results right" "$([ -z "$bad" ]; echo $?)" "$bad"
    done

    # Two ranks on one GPU, as two processes with their own output: both must fail, naming both.
    local be
    for be in jccl nccl; do
        if [ "$be" = nccl ] && [ -z "${JCCL_NCCL_LIBRARY:-}" ] && [ "$dry" != 1 ]; then
            check "runtime: two ranks on one GPU ($be)" 1 "libnccl.so.2 not found (nvidia-nccl wheel)"
            continue
        fi
        local port=$((29600 + RANDOM % 1000)) token; token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
        echo "## two ranks on GPU $LAST ($be): CUDA_VISIBLE_DEVICES=$LAST for both" >> "$LOG"
        local pids=()
        for r in 0 1; do
            if [ "$dry" = 1 ]; then echo "[dry-run] rank $r" > "$tmp/shared$r"; continue; fi
            JCCL_COMM_ID=127.0.0.1:$port JCCL_RANK=$r JCCL_WORLD_SIZE=2 JCCL_LOCAL_RANK=$r JCCL_LOCAL_SIZE=2 JCCL_AUTH_TOKEN=$token \
                CUDA_VISIBLE_DEVICES=$LAST timeout -k 5 90 "${JCCL[@]}" perf all_reduce --device cuda --backend "$be" -b 8 -e 1K \
                > "$tmp/shared$r" 2>&1 &
            pids+=($!)
        done
        local rcs=()
        for p in "${pids[@]}"; do wait "$p"; rcs+=($?); done
        bad=""
        for r in 0 1; do
            echo "### rank $r (rc ${rcs[r]:-?})" >> "$LOG"
            cat "$tmp/shared$r" >> "$LOG"
            [ "${rcs[r]:-1}" != 0 ] && [ "${rcs[r]:-1}" != 124 ] || bad+="rank $r rc=${rcs[r]:-?} (must fail, not pass or hang); "
            local f="$tmp/shared$r"
            has "$f" "rank $r: " || bad+="rank $r: its message does not start with its rank; "
            has "$f" "two ranks on one GPU: ranks 0 and 1 are on one GPU of host" || bad+="rank $r: no 'ranks 0 and 1 are on one GPU'; "
            tr 'A-F' 'a-f' < "$f" | grep -qF "${BUS[LAST]}, ${UUID[LAST]}" || bad+="rank $r: GPU bus/UUID not named; "
            has "$f" "rank 0 (host " && has "$f" "rank 1 (host " || bad+="rank $r: both ranks not described; "
            has "$f" "(CUDA_VISIBLE_DEVICES=$LAST; the only GPU this process sees)" || bad+="rank $r: CUDA_VISIBLE_DEVICES not named; "
        done
        [ "$dry" = 1 ] && bad=""
        check "runtime: two ranks on one GPU ($be) fail on every rank, naming both" "$([ -z "$bad" ]; echo $?)" "$bad"
    done

    # jccl doctor: the same answers.
    local dj="$tmp/doctor.json" msg status
    doctor_json() { # doctor_json ARGS... : the JSON on stdout into $dj, stderr (JVM warnings) into the log
        if [ "$dry" = 1 ]; then echo "[dry-run] jccl doctor $*" >> "$LOG"; echo '{"checks":[]}' > "$dj"; return 0; fi
        timeout -k 5 60 "${JCCL[@]}" doctor "$@" > "$dj" 2>> "$LOG"
    }
    doctor_check() { # doctor_check NAME WANT_STATUS TEXT... (reads $dj)
        local name=$1 want=$2
        shift 2
        status=$(python3 -c "import json,sys; c=[x for x in json.load(open('$dj'))['checks'] if x['id']=='cuda-visible-devices'][0]; print(c['status']); print(c['message'])" 2>&1)
        echo "$status" >> "$LOG"
        bad=""
        [ "$(echo "$status" | head -n 1)" = "$want" ] || bad+="status $(echo "$status" | head -n 1), want $want; "
        local t
        for t in "$@"; do
            echo "$status" | tr 'A-Z' 'a-z' | grep -qF -- "$(echo "$t" | tr 'A-Z' 'a-z')" || bad+="missing '$t'; "
        done
        [ "$dry" = 1 ] && bad=""
        check "doctor: $name" "$([ -z "$bad" ]; echo $?)" "$bad"
    }
    local per; per=$(seq -s: 0 $LAST)
    echo "## doctor --cuda-visible-devices-per-rank $per" >> "$LOG"
    doctor_json --cuda-visible-devices-per-rank "$per" --json
    doctor_check "one GPU per rank by index" PASS "local rank 0 -> gpu 0 (0000:${BUS[0]}" "local rank $LAST -> gpu $LAST (0000:${BUS[LAST]}"
    per=""
    for r in $(seq 0 $LAST); do per+="${per:+:}${UUID[r]:0:16}"; done
    echo "## doctor --cuda-visible-devices-per-rank $per" >> "$LOG"
    doctor_json --cuda-visible-devices-per-rank "$per" --json
    doctor_check "one GPU per rank by UUID" PASS "local rank 1 -> gpu 1 (0000:${BUS[1]}"
    echo "## CUDA_VISIBLE_DEVICES=$(seq -s, $LAST -1 0) doctor -np $n" >> "$LOG"
    CUDA_VISIBLE_DEVICES=$(seq -s, $LAST -1 0) doctor_json -np "$n" --json
    doctor_check "reordered list" PASS "local rank 0 -> gpu $LAST (0000:${BUS[LAST]}" "local rank $LAST -> gpu 0 (0000:${BUS[0]}"
    echo "## doctor --cuda-visible-devices-per-rank $LAST:$LAST" >> "$LOG"
    doctor_json --cuda-visible-devices-per-rank "$LAST:$LAST" --json
    doctor_check "two ranks on one GPU" FAIL "ranks 0 and 1 are on one gpu of host" "0000:${BUS[LAST]}, ${UUID[LAST]}"
    echo "## jccl run -np $n -- sh -c 'CUDA_VISIBLE_DEVICES=\$JCCL_LOCAL_RANK exec jccl doctor --json'" >> "$LOG"
    run_limited 90 "$tmp/inrank" "${JCCL[@]}" run -np "$n" --timeout 80 -- sh -c "export CUDA_VISIBLE_DEVICES=\$JCCL_LOCAL_RANK; $JCCL_SH doctor --json > /tmp/doctor-rank\$JCCL_LOCAL_RANK.json; true"
    cat "$tmp/inrank" >> "$LOG"
    for r in $(seq 0 $LAST); do
        cp "/tmp/doctor-rank$r.json" "$dj" 2>/dev/null || echo '{"checks":[]}' > "$dj"
        doctor_check "inside rank $r of jccl run" PASS "local rank $r -> gpu $r (0000:${BUS[r]}" "the only gpu this process sees" "this doctor runs as local rank $r of $n"
    done

    # The default binding of GPU ranks: the launcher's lines, and what each rank really got.
    echo "## jccl run -np $n (default --bind-to auto), JCCL_DEBUG=INFO: Cpus_allowed_list" >> "$LOG"
    JCCL_DEBUG=INFO run_limited 60 "$tmp/bind" "${JCCL[@]}" run -np "$n" -- sh -c 'grep Cpus_allowed_list /proc/self/status'
    cat "$tmp/bind" >> "$LOG"
    bad=""
    for r in $(seq 0 $LAST); do
        line=$(grep -F "[$r] Cpus_allowed_list" "$tmp/bind" | cut -f2)
        node=$(cat "/sys/bus/pci/devices/0000:${BUS[r]}/numa_node" 2>/dev/null || echo -1)
        if [ "$node" -ge 0 ] 2>/dev/null; then
            want=$(intersect "$(cat "/sys/devices/system/node/node$node/cpulist" 2>/dev/null)" "$(grep Cpus_allowed_list /proc/self/status | cut -f2)")
            has "$tmp/bind" "jccl run: rank $r bound to CPUs" || bad+="rank $r: no launcher line saying it was bound; "
            [ "$line" = "$want" ] || bad+="rank $r on CPUs '$line', its GPU's node $node has '$want' (the launcher's own CPUs may narrow it: see env.txt); "
        else
            has "$tmp/bind" "jccl run: rank $r not bound" || bad+="rank $r: GPU numa_node $node, but no 'not bound' line; "
        fi
        case "$line" in *-*|*,*) ;; *) bad+="rank $r on a single CPU '$line'; " ;; esac
    done
    [ "$dry" = 1 ] && bad=""
    check "default binding: GPU ranks on their GPU's NUMA node, never one core" "$([ -z "$bad" ]; echo $?)" "$bad"
    rm -rf "$tmp" /tmp/doctor-rank*.json
}

# ---------------------------------------------------------------- perf
phase_perf() {
    LOG="$OUT/perf.txt"
    : > "$LOG"
    : > "$OUT/perf-json.txt"
    local tmp; tmp=$(mktemp -d)
    local order=() r
    for r in $(seq 1 "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then order+=("default:$r" "none:$r"); else order+=("none:$r" "default:$r"); fi
        [ "$r" = 1 ] && order+=("nccl:1")
    done
    local item label round flags t rc
    for item in "${order[@]}"; do
        label=${item%%:*}
        round=${item##*:}
        case $label in
            default) flags=() ;;
            none) flags=(--bind-to none) ;;
            nccl) flags=(--backend nccl) ;;
        esac
        t=$(left)
        [ "$t" -gt 180 ] && t=180
        if [ "$t" -lt 30 ]; then
            check "perf $label round $round" 1 "not run: the budget is spent"
            continue
        fi
        echo "### $label round $round: jccl perf all_reduce -np $NGPUS --device cuda -b 8 -e $MAXBYTES -f 4 ${flags[*]}" >> "$LOG"
        run_limited "$t" "$tmp/$label-$round" "${JCCL[@]}" perf all_reduce -np "$NGPUS" --device cuda -b 8 -e "$MAXBYTES" -f 4 \
            "${flags[@]}" -J "$tmp/$label-$round.json"
        rc=$?
        cat "$tmp/$label-$round" >> "$LOG"
        { echo "### $label round $round"; cat "$tmp/$label-$round.json" 2>/dev/null; echo; } >> "$OUT/perf-json.txt"
        local bad=""
        [ $rc = 0 ] || bad+="rc=$rc; "
        has "$tmp/$label-$round" "Out of bounds values : 0 OK" || bad+="no '0 OK' footer; "
        [ "$dry" = 1 ] && bad=""
        check "perf $label round $round" "$([ -z "$bad" ]; echo $?)" "$bad"
    done
    # default vs none: best (lowest) out-of-place time of the rounds at each size.
    python3 - "$tmp" "$ROUNDS" > "$OUT/binding.txt" 2>&1 <<'PY'
import glob, os, re, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def table(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows[int(f[0])] = float(f[5])
    return rows
best = {}
for label in ("default", "none", "nccl"):
    for p in glob.glob(os.path.join(d, label + "-*")):
        if p.endswith(".json"):
            continue
        for size, t in table(p).items():
            k = (label, size)
            best[k] = min(best.get(k, float("inf")), t)
sizes = sorted({s for (_, s) in best})
print("# best out-of-place time (us) of %d round(s); default = --bind-to auto; ratio = default / none" % rounds)
print("%12s %12s %12s %8s %12s  %s" % ("size", "default", "none", "ratio", "nccl", "verdict"))
bad = 0
for s in sizes:
    a, b, n = best.get(("default", s)), best.get(("none", s)), best.get(("nccl", s))
    if a is None or b is None:
        print("%12d %12s %12s %8s %12s  MISSING" % (s, a, b, "-", n)); bad += 1; continue
    slow = a > b * 1.10 + 3.0
    bad += slow
    print("%12d %12.2f %12.2f %8.3f %12s  %s" % (s, a, b, a / b if b else 0, "%.2f" % n if n else "-", "SLOWER" if slow else "ok"))
print("VERDICT: %s" % ("default is at least as fast as --bind-to none at every size (within 10% + 3 us)" if bad == 0 else "%d size(s) slower with the default binding" % bad))
sys.exit(1 if bad or not sizes else 0)
PY
    rc=$?
    cat "$OUT/binding.txt" >> "$LOG"
    [ "$dry" = 1 ] && rc=0
    check "default binding at least as fast as --bind-to none at every size" "$rc" "$(grep -E 'SLOWER|MISSING|VERDICT' "$OUT/binding.txt" | head -n 8 | tr '\n' ' ')"
    rm -rf "$tmp"
}

for p in "${phases[@]}"; do
    echo "gpu-launch-check: phase $p (elapsed $((SECONDS - start))s of ${BUDGET}s)"
    "phase_$p"
done

{
    echo
    echo "== gpu-launch-check summary: ${phases[*]} on ${NGPUS} GPU(s) in $((SECONDS - start))s: $NPASS passed, ${#FAILS[@]} failed =="
    for f in "${FAILS[@]}"; do echo "FAIL  ${f:0:600}"; done
    [ -f "$OUT/binding.txt" ] && cat "$OUT/binding.txt"
} | tee "$OUT/summary.txt"
[ ${#FAILS[@]} -eq 0 ]
