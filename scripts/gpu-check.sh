#!/usr/bin/env bash
# GPU correctness tests and performance tables, ON the lent GPU machine (CUDA 13, python3 with the
# nvidia-nccl wheel, no Java, no Maven, no network), from the repository root, with .device/ made
# by scripts/gpu-prep.sh carried along. One call fits a 10-minute limit: every phase has its own
# timeout and the whole run a budget, so a hang costs one phase, never the others or the summary.
#
#   scripts/gpu-check.sh [--dry-run] PHASE...       PHASE: tests perf sanitizer mproc (or all)
#
#   tests      JUnit console: CudaDriverTest, then GpuCollectivesTest           -> $OUT/tests.txt
#   perf       jccl perf tables, --backend jccl then nccl, one process, -g N GPUs -> $OUT/perf.txt
#   sanitizer  compute-sanitizer memcheck (then racecheck) over a tiny sweep      -> $OUT/sanitizer.txt
#   mproc      jccl run -np N: perf all_reduce --device cuda, one process per GPU -> $OUT/mproc.txt
# Always: $OUT/env.txt (machine, driver, topology, NCCL path, bundle manifest), and a summary
# printed last (also $OUT/summary.txt). At most 6 files are written to $OUT.
#
# Suggested calls (each under 10 minutes on 4x H200):
#   scripts/gpu-check.sh tests sanitizer
#   scripts/gpu-check.sh perf mproc
#
# Environment (all optional):
#   OUT                 where logs go (default /tmp/gpu-check-out)
#   NGPUS               GPUs to use (default: all that nvidia-smi lists)
#   BUDGET              seconds for the whole call (default 560): a phase never starts a command that
#                       would outlive it
#   TESTS_TIMEOUT       seconds for the tests phase (default 240)
#   TEST_PROPS          extra JVM flags for GpuCollectivesTest, e.g. "-Djccl.gpu.full=true" or
#                       "-Djccl.gpu.filter=allReduce -Djccl.gpu.backends=jccl" (see GpuEnv's javadoc)
#   TEST_SELECT         JUnit console selectors (default --select-class org.jccl.cuda.GpuCollectivesTest)
#   PERF_TIMEOUT        seconds for the perf phase (default 330); PERF_RUN_TIMEOUT per table (default 120)
#   PERF_COLLS          collectives (default "all_reduce all_gather reduce_scatter alltoall sendrecv broadcast")
#   PERF_BACKENDS       default "jccl nccl"
#   MAXBYTES            largest size (default 8G: 2 x 8 GB per GPU); PERF_ARGS extra perf flags;
#                       PERF_ITERS, PERF_WARMUP timed and warm-up operations per size (default 20, 5)
#   CLI                 the jccl-cli jar to measure (default .device/cli/jccl-cli.jar; another build: same sitting)
#   SAN_TIMEOUT         seconds for the sanitizer phase (default 200); SAN_TOOLS (default "memcheck racecheck")
#   SAN_RANKS           rank counts under the sanitizer (default 2); SAN_PROPS extra JVM flags;
#                       SAN_SELECT JUnit console selectors (default --select-class org.jccl.cuda.GpuCollectivesTest)
#   MPROC_TIMEOUT       seconds for the mproc phase (default 120); MPROC_MAXBYTES (default 1G); MPROC_ARGS
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
DEV=.device
OUT=${OUT:-/tmp/gpu-check-out}
BUDGET=${BUDGET:-560}
RESERVE=15 # seconds kept for the summary

usage() {
    sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

dry=0
phases=()
for a in "$@"; do
    case "$a" in
        -n|--dry-run) dry=1 ;;
        -h|--help) usage; exit 0 ;;
        all) phases+=(tests perf sanitizer mproc) ;;
        tests|perf|sanitizer|mproc) phases+=("$a") ;;
        *) echo "gpu-check: unknown phase '$a'; use tests, perf, sanitizer, mproc or all (--help for more)" >&2; exit 2 ;;
    esac
done
if [ ${#phases[@]} -eq 0 ]; then
    echo "gpu-check: no phase given; use: scripts/gpu-check.sh [--dry-run] tests|perf|sanitizer|mproc|all ..." >&2
    exit 2
fi

mkdir -p "$OUT"
exec 3>&1 # the terminal's stdout, for --dry-run's listing while phases redirect theirs
start=$SECONDS
SUMMARY=()     # lines of the final table
DETAIL=()      # indented lines under it

elapsed() { echo $((SECONDS - start)); }
# Seconds a command may still take: min(wanted, what is left of the budget and of the phase).
allow() {
    local want=$1 phase_end=${2:-}
    local left=$((BUDGET - RESERVE - (SECONDS - start)))
    if [ -n "$phase_end" ] && [ $((phase_end - SECONDS)) -lt "$left" ]; then
        left=$((phase_end - SECONDS))
    fi
    [ "$want" -lt "$left" ] && left=$want
    [ "$left" -lt 0 ] && left=0
    echo "$left"
}
# Runs a command with a time limit (or prints it with --dry-run); returns its exit code (124: timed out).
limited() {
    local secs=$1
    shift
    if [ "$dry" = 1 ]; then
        echo "[dry-run] timeout ${secs}s: $*" >&3
        return 0
    fi
    timeout -k 15 "$secs" "$@"
}

# ---------------------------------------------------------------- environment
if [ "$dry" = 1 ]; then
    echo "[dry-run] tar -xJf $DEV/jre25.tar.xz -C /tmp"
    JAVA=java
    NGPUS=${NGPUS:-4}
else
    if [ ! -f "$DEV/jre25.tar.xz" ]; then
        echo "gpu-check: $DEV/jre25.tar.xz is missing: run scripts/gpu-prep.sh on the CPU machine and carry $DEV" >&2
        exit 2
    fi
    tar -xJf "$DEV/jre25.tar.xz" -C /tmp || { echo "gpu-check: could not unpack the Java runtime" >&2; exit 2; }
    export JAVA_HOME=/tmp/jre25 PATH=/tmp/jre25/bin:$PATH
    JAVA=/tmp/jre25/bin/java
    NGPUS=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
    [ "$NGPUS" -ge 1 ] 2>/dev/null || NGPUS=1
fi
# NVLink multicast (NVLS) is forbidden on these machines: NCCL must not use it, nor PyTorch's symmetric memory.
export NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NCCL_DIR=$(python3 -c "import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])" 2>/dev/null || true)
if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/lib/libnccl.so.2" ]; then
    export JCCL_NCCL_LIBRARY=${JCCL_NCCL_LIBRARY:-$NCCL_DIR/lib/libnccl.so.2}
    export LD_LIBRARY_PATH="$NCCL_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
SANITIZER=$(command -v compute-sanitizer 2>/dev/null || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer 2>/dev/null | head -n 1 || true)
JOPTS=(--enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -XX:+UseParallelGC -Xss1m)
CONSOLE="$DEV/test/junit-platform-console-standalone.jar"
TEST_CP="$DEV/test/jccl-cuda.jar:$DEV/test/jccl-cuda-tests.jar:$DEV/test/jccl-core.jar"
# CLI: the jccl command to measure (default the packed one); another build for same-sitting comparisons.
CLI=${CLI:-$DEV/cli/jccl-cli.jar}

{
    echo "# gpu-check $(date -u +%FT%TZ) on $(hostname), phases: ${phases[*]}, NGPUS=$NGPUS, budget ${BUDGET}s"
    echo "## bundle"
    cat "$DEV/MANIFEST.txt" 2>/dev/null || echo "(no $DEV/MANIFEST.txt)"
    echo "## java"
    "$JAVA" -version 2>&1
    echo "## NCCL"
    echo "python wheel dir: ${NCCL_DIR:-not found}"
    ls -la "${NCCL_DIR:-/nonexistent}/lib" 2>&1 | grep -i nccl
    echo "JCCL_NCCL_LIBRARY=${JCCL_NCCL_LIBRARY:-unset}"
    echo "## compute-sanitizer: ${SANITIZER:-not found}"
    [ -n "$SANITIZER" ] && "$SANITIZER" --version 2>&1 | tail -n 2
    echo "## environment (NCCL_*, JCCL_*, CUDA_*, TORCH_*)"
    env | grep -E '^(NCCL|JCCL|CUDA|TORCH)_' | sort
    echo "## host"
    uname -a
    echo "cpus: $(nproc)"
    free -g 2>/dev/null
    echo "## nvidia-smi"
    nvidia-smi 2>&1
    echo "## nvidia-smi topo -m"
    nvidia-smi topo -m 2>&1
} > "$OUT/env.txt" 2>&1
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
SUMMARY+=("$(printf '%-10s %4s %5s  %s' env 0 "$(elapsed)" "${NGPUS}x ${gpu_name:-GPU}, driver ${driver:-?}, NCCL ${JCCL_NCCL_LIBRARY:-not found}, bundle $(sed -n 's/^commit: \([^ ]*\).*/\1/p' "$DEV/MANIFEST.txt" 2>/dev/null)")")

# The lines of a failed command's output worth reading first: the first error-looking line and the last line.
err_lines() {
    local f=$1 first last
    first=$(grep -m 1 -iE 'exception|error|unknown|failed|cannot|not found|timed out|usage:' "$f")
    last=$(grep -v '^[[:space:]]*$' "$f" | tail -n 1)
    [ -n "$first" ] && echo "    ${first:0:200}"
    [ -n "$last" ] && [ "$last" != "$first" ] && echo "    ${last:0:200}"
}

# "test -- first line of its failure" for the first N failed tests of a testfeed log.
junit_failures() {
    awk -v max="$2" '/ :: FAILED$/ && n < max { name = $0; sub(/^JUnit Jupiter > /, "", name); sub(/ :: FAILED$/, "", name);
        getline; sub(/^[ \t]+/, ""); print name " -- " $0; n++ }' "$1"
}

# Console summary counts of one JUnit run: "ok/failed/aborted".
junit_counts() {
    local f=$1 ok failed aborted
    ok=$(grep -oE '[0-9]+ tests successful' "$f" | grep -oE '^[0-9]+' | tail -n 1)
    failed=$(grep -oE '[0-9]+ tests failed' "$f" | grep -oE '^[0-9]+' | tail -n 1)
    aborted=$(grep -oE '[0-9]+ tests aborted' "$f" | grep -oE '^[0-9]+' | tail -n 1)
    echo "${ok:-?} ok, ${failed:-?} failed, ${aborted:-?} skipped"
}

# ---------------------------------------------------------------- phases
phase_tests() {
    local f="$OUT/tests.txt" tmp rc=0 rc1 t
    local phase_end=$((SECONDS + ${TESTS_TIMEOUT:-240}))
    tmp=$(mktemp)
    : > "$f"
    # testfeed: one line per test as it starts and ends, failures inline, so a killed run still shows where it was.
    local console_args=(execute --disable-banner --disable-ansi-colors --details=testfeed --class-path "$TEST_CP")
    # A GPU kernel waiting for a peer gives up after this long (the tests' own deadline is 30 s per case).
    local wait_timeout=${JCCL_CUDA_WAIT_TIMEOUT:-20}

    echo "### CudaDriverTest" >> "$f"
    t=$(allow 60 "$phase_end")
    JCCL_CUDA_WAIT_TIMEOUT=$wait_timeout limited "$t" "$JAVA" "${JOPTS[@]}" -jar "$CONSOLE" "${console_args[@]}" \
        --select-class org.jccl.cuda.CudaDriverTest > "$tmp" 2>&1
    rc1=$?
    cat "$tmp" >> "$f"
    DETAIL+=("  CudaDriverTest       rc=$rc1$([ $rc1 -eq 124 ] && echo ' (timed out)')  $(junit_counts "$tmp")")
    while IFS= read -r l; do DETAIL+=("    ${l:0:220}"); done < <(junit_failures "$tmp" 6)
    [ $rc1 -ne 0 ] && rc=$rc1

    echo "### GpuCollectivesTest ${TEST_PROPS:-}" >> "$f"
    t=$(allow 100000 "$phase_end")
    # shellcheck disable=SC2086 # TEST_PROPS and TEST_SELECT are lists of flags
    JCCL_CUDA_WAIT_TIMEOUT=$wait_timeout limited "$t" "$JAVA" "${JOPTS[@]}" ${TEST_PROPS:-} -jar "$CONSOLE" "${console_args[@]}" \
        ${TEST_SELECT:---select-class org.jccl.cuda.GpuCollectivesTest} > "$tmp" 2>&1
    rc1=$?
    cat "$tmp" >> "$f"
    DETAIL+=("  GpuCollectivesTest   rc=$rc1$([ $rc1 -eq 124 ] && echo ' (timed out)')  $(junit_counts "$tmp")")
    # Which tests failed (and where a killed run was), and the sweep lines that counted failures.
    while IFS= read -r l; do DETAIL+=("    ${l:0:220}"); done < <(junit_failures "$tmp" 12)
    if [ $rc1 -eq 124 ]; then
        l=$(grep ':: STARTED$' "$tmp" | tail -n 1 | sed 's/^JUnit Jupiter > //; s/ :: STARTED$//')
        DETAIL+=("    running when killed: ${l:0:200}")
    fi
    while IFS= read -r l; do DETAIL+=("    ${l:0:220}"); done < <(grep -E 'case\(s\), [1-9][0-9]* failed' "$tmp" | head -n 12)
    [ $rc1 -ne 0 ] && rc=$rc1
    rm -f "$tmp"
    return $rc
}

# One perf table: appends to perf.txt, notes rc, max-size busbw, average busbw and wrong values.
perf_one() {
    local label=$1 t=$2 f=$3
    shift 3
    local tmp rc big avg oob
    tmp=$(mktemp)
    echo "### $label: java -jar $CLI $*" >> "$f"
    limited "$t" "$JAVA" "${JOPTS[@]}" -jar "$CLI" "$@" > "$tmp" 2>&1
    rc=$?
    cat "$tmp" >> "$f"
    [ $rc -eq 124 ] && echo "### $label: timed out after ${t}s" >> "$f"
    big=$(awk '/^ +[0-9]+ +[0-9]+ /{ last = $8 } END { print last }' "$tmp")
    avg=$(sed -n 's/^# *Avg bus bandwidth *: *\([^ ]*\).*/\1/p' "$tmp" | tail -n 1)
    oob=$(sed -n 's/^# *Out of bounds values *: *\([^ ]*\).*/\1/p' "$tmp" | tail -n 1)
    DETAIL+=("$(printf '  %-34s rc=%-3s busbw@max=%-8s avg=%-9s wrong=%s' "$label" "$rc" "${big:--}" "${avg:--}" "${oob:--}")")
    if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then
        while IFS= read -r l; do DETAIL+=("$l"); done < <(err_lines "$tmp")
    fi
    rm -f "$tmp"
    return $rc
}

phase_perf() {
    local f="$OUT/perf.txt" rc=0 runs=0 ok=0 t coll dt be types
    local phase_end=$((SECONDS + ${PERF_TIMEOUT:-330}))
    : > "$f"
    for coll in ${PERF_COLLS:-all_reduce all_gather reduce_scatter alltoall sendrecv broadcast}; do
        types="float"
        [ "$coll" = all_reduce ] && types="float bfloat16"
        for dt in $types; do
            for be in ${PERF_BACKENDS:-jccl nccl}; do
                t=$(allow "${PERF_RUN_TIMEOUT:-120}" "$phase_end")
                if [ "$t" -lt 10 ]; then
                    DETAIL+=("$(printf '  %-34s not run: no time left' "$coll $dt $be")")
                    rc=124
                    continue
                fi
                runs=$((runs + 1))
                # shellcheck disable=SC2086 # PERF_ARGS is a list of flags
                if perf_one "$coll $dt $be" "$t" "$f" perf "$coll" -b 8 -e "${MAXBYTES:-8G}" -f 4 -g "$NGPUS" -w "${PERF_WARMUP:-5}" -n "${PERF_ITERS:-20}" -c 1 \
                        -d "$dt" --backend "$be" ${PERF_ARGS:-}; then
                    ok=$((ok + 1))
                else
                    rc=1
                fi
            done
        done
    done
    PERF_NOTE="$ok of $runs tables ok"
    return $rc
}

phase_sanitizer() {
    local f="$OUT/sanitizer.txt" rc=0 rc1 t tool tmp errs
    local phase_end=$((SECONDS + ${SAN_TIMEOUT:-200}))
    : > "$f"
    if [ -z "$SANITIZER" ] && [ "$dry" != 1 ]; then
        echo "compute-sanitizer not found (PATH, /usr/local/cuda/bin)" >> "$f"
        SAN_NOTE="compute-sanitizer not found"
        return 127
    fi
    tmp=$(mktemp)
    SAN_NOTE=""
    for tool in ${SAN_TOOLS:-memcheck racecheck}; do
        t=$(allow 150 "$phase_end")
        if [ "$t" -lt 30 ]; then
            SAN_NOTE+="$tool: not run (no time left); "
            continue
        fi
        echo "### compute-sanitizer --tool $tool (limit ${t}s)" >> "$f"
        # Kernels run 10-100x slower under the sanitizer: tiny sweep, jccl only, longer deadlines.
        # shellcheck disable=SC2086 # SAN_PROPS is a list of flags
        JCCL_CUDA_WAIT_TIMEOUT=${SAN_WAIT_TIMEOUT:-60} limited "$t" "${SANITIZER:-compute-sanitizer}" --tool "$tool" \
            --launch-timeout 120 --target-processes all --error-exitcode 3 --print-limit 40 \
            "$JAVA" "${JOPTS[@]}" -Djccl.gpu.sweep=tiny -Djccl.gpu.backends=jccl -Djccl.gpu.ranks="${SAN_RANKS:-2}" \
            -Djccl.gpu.caseTimeoutSeconds=120 ${SAN_PROPS:-} \
            -jar "$CONSOLE" execute --disable-banner --disable-ansi-colors --details=summary --class-path "$TEST_CP" \
            ${SAN_SELECT:---select-class org.jccl.cuda.GpuCollectivesTest} --exclude-tag errors > "$tmp" 2>&1
        rc1=$?
        cat "$tmp" >> "$f"
        # memcheck prints "ERROR SUMMARY: N errors", racecheck "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
        errs=$(grep -oE 'ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard' "$tmp" | tail -n 1 | grep -oE '[0-9]+')
        SAN_NOTE+="$tool: rc=$rc1$([ $rc1 -eq 124 ] && echo ' timed out'), ${errs:-?} error(s), tests $(junit_counts "$tmp"); "
        while IFS= read -r l; do DETAIL+=("    $tool: ${l:0:200}"); done < <(grep -E '^========= +(Invalid|Race|Error|Program hit)' "$tmp" | sort | uniq -c | sort -rn | head -n 6)
        [ $rc1 -ne 0 ] && rc=$rc1
    done
    rm -f "$tmp"
    return $rc
}

phase_mproc() {
    local f="$OUT/mproc.txt" t rc tmp avg oob
    t=$(allow "${MPROC_TIMEOUT:-120}")
    tmp=$(mktemp)
    echo "### jccl run -np $NGPUS -- org.jccl.cli.JcclCli perf all_reduce --device cuda (limit ${t}s)" > "$f"
    # shellcheck disable=SC2086 # MPROC_ARGS is a list of flags
    limited "$t" "$JAVA" "${JOPTS[@]}" -jar "$CLI" run -np "$NGPUS" --timeout $((t > 20 ? t - 10 : t)) -- \
        org.jccl.cli.JcclCli perf all_reduce --device cuda -b 8 -e "${MPROC_MAXBYTES:-1G}" -f 4 -c 1 ${MPROC_ARGS:-} > "$tmp" 2>&1
    rc=$?
    cat "$tmp" >> "$f"
    avg=$(sed -n 's/^\(\[0\] \)\{0,1\}# *Avg bus bandwidth *: *\([^ ]*\).*/\2/p' "$tmp" | tail -n 1)
    oob=$(sed -n 's/^\(\[0\] \)\{0,1\}# *Out of bounds values *: *\([^ ]*\).*/\2/p' "$tmp" | tail -n 1)
    MPROC_NOTE="$NGPUS processes, avg busbw ${avg:--}, wrong ${oob:--}"
    if [ $rc -ne 0 ]; then
        while IFS= read -r l; do DETAIL+=("$l"); done < <(err_lines "$tmp")
    fi
    rm -f "$tmp"
    return $rc
}

# ---------------------------------------------------------------- run
PERF_NOTE="" SAN_NOTE="" MPROC_NOTE=""
worst=0
for p in "${phases[@]}"; do
    p0=$SECONDS
    echo "gpu-check: phase $p (elapsed $(elapsed)s of ${BUDGET}s)"
    if [ $((BUDGET - RESERVE - (SECONDS - start))) -lt 20 ]; then
        SUMMARY+=("$(printf '%-10s %4s %5s  %s' "$p" - 0 'not run: the budget is spent')")
        worst=1
        continue
    fi
    DETAIL=()
    "phase_$p"
    rc=$?
    [ $rc -ne 0 ] && worst=1
    case "$p" in
        tests) note="see tests.txt" ;;
        perf) note="$PERF_NOTE (see perf.txt)" ;;
        sanitizer) note="${SAN_NOTE}(see sanitizer.txt)" ;;
        mproc) note="$MPROC_NOTE (see mproc.txt)" ;;
    esac
    [ $rc -eq 124 ] && note="TIMED OUT; $note"
    SUMMARY+=("$(printf '%-10s %4s %5s  %s' "$p" "$rc" $((SECONDS - p0)) "$note")")
    for d in "${DETAIL[@]}"; do SUMMARY+=("$d"); done
done

{
    echo
    echo "== gpu-check summary: ${phases[*]} in $(elapsed)s (budget ${BUDGET}s), logs in $OUT =="
    printf '%-10s %4s %5s  %s\n' phase rc secs result
    for l in "${SUMMARY[@]}"; do echo "$l"; done
} | tee "$OUT/summary.txt"
exit $worst
