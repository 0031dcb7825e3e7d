#!/usr/bin/env bash
# What the one-shot all-reduce's mismatch guard costs, ON the lent GPU machine, from the repository root with
# .device/ (scripts/gpu-prep.sh) carried along. Interleaved rounds of `jccl perf all_reduce` over the one-shot
# sizes (8 B .. 256 KiB, nccl-tests' mean timing), in both GPU layouts: one process driving N GPUs (-g N:
# createAll) and N processes (-np N --device cuda: create(host), CUDA IPC); variants: "guard" (the default),
# "none" (JCCL_CHECK=none: no guard word stored or compared), and "base" when BASE_CLI names another build's
# jccl-cli.jar with its lib/ beside it (e.g. main's, packed under .device/base/). The variants' order rotates
# every round. Writes every run's table and a summary: per layout, size and variant the median time of the
# rounds (out of place / in place), and the median of the per-round ratios guard/none (and guard/base).
#
#   scripts/gpu-oneshot-guard.sh               run (ROUNDS=6 ITERS=2000 NGPUS=all OUT=/tmp/gpu-oneshot-guard)
#   scripts/gpu-oneshot-guard.sh --summarize RAW   only summarize a raw file written by a run
#
# A run takes about 3-5 minutes on 4 GPUs with the defaults (24 perf runs of 16 sizes, each about 5-10 s). Output: $OUT/raw.txt (every
# table, each row prefixed "layout variant round"), $OUT/summary.txt (printed at the end).
set -u

summarize() {
    awk '
    # raw rows: layout variant round size count type redop root oop_time oop_algbw oop_busbw oop_wrong ip_time ...
    function median(list,    n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
        if (n == 0) return "-"
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $1 != "#" && $4 ~ /^[0-9]+$/ && NF >= 13 {
        key = $1 SUBSEP $4; sizes[$1, $4] = 1; layouts[$1] = 1; variants[$2] = 1
        oop[$1, $4, $2] = oop[$1, $4, $2] " " $9; ip[$1, $4, $2] = ip[$1, $4, $2] " " $13
        t[$1, $4, $2, $3] = $9; u[$1, $4, $2, $3] = $13; rounds[$3] = 1
    }
    END {
        for (l in layouts) {
            printf "\n%s: all_reduce float sum, time in us (median of rounds, out of place / in place); ratios: median of per-round ratios\n", l
            printf "%10s %17s %17s %17s %20s %20s\n", "bytes", "guard", "none", "base", "guard/none oop, ip", "guard/base oop, ip"
            n = 0
            for (k in sizes) { split(k, p, SUBSEP); if (p[1] == l) s[++n] = p[2] + 0 }
            for (i = 2; i <= n; i++) { x = s[i]; for (j = i - 1; j >= 1 && s[j] > x; j--) s[j + 1] = s[j]; s[j + 1] = x }
            for (i = 1; i <= n; i++) {
                z = s[i]; line = sprintf("%10d", z)
                for (v = 1; v <= 3; v++) {
                    name = v == 1 ? "guard" : v == 2 ? "none" : "base"
                    line = line sprintf(" %17s", (l, z, name) in oop ? median(oop[l, z, name]) " / " median(ip[l, z, name]) : "-")
                }
                for (v = 2; v <= 3; v++) {
                    name = v == 2 ? "none" : "base"; ro = ""; ri = ""
                    for (r in rounds) if ((l, z, "guard", r) in t && (l, z, name, r) in t && t[l, z, name, r] > 0 && u[l, z, name, r] > 0) {
                        ro = ro " " t[l, z, "guard", r] / t[l, z, name, r]; ri = ri " " u[l, z, "guard", r] / u[l, z, name, r]
                    }
                    line = line sprintf(" %20s", ro == "" ? "-" : sprintf("%.3f, %.3f", median(ro), median(ri)))
                }
                print line
            }
            delete s
        }
    }' "$1"
}

if [ "${1:-}" = "--summarize" ]; then
    summarize "$2"
    exit 0
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

DEV=.device
OUT=${OUT:-/tmp/gpu-oneshot-guard}
ROUNDS=${ROUNDS:-6}
ITERS=${ITERS:-2000}
mkdir -p "$OUT"
[ -f "$DEV/jre25.tar.xz" ] || { echo "gpu-oneshot-guard: $DEV/jre25.tar.xz is missing: run scripts/gpu-prep.sh and carry $DEV" >&2; exit 2; }
tar -xJf "$DEV/jre25.tar.xz" -C /tmp || exit 2
JAVA=/tmp/jre25/bin/java
export JAVA_HOME=/tmp/jre25 PATH=/tmp/jre25/bin:$PATH
export NCCL_NVLS_ENABLE=0
NGPUS=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
JOPTS=(--enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -XX:+UseParallelGC)
variants=(guard none)
[ -n "${BASE_CLI:-}" ] && { [ -f "$BASE_CLI" ] || { echo "gpu-oneshot-guard: BASE_CLI=$BASE_CLI is missing" >&2; exit 2; }; variants+=(base); }
raw="$OUT/raw.txt"
: > "$raw"
echo "# gpu-oneshot-guard $(date -u +%FT%TZ) on $(hostname): $NGPUS GPUs, $ROUNDS rounds, $ITERS iterations, variants ${variants[*]}" | tee -a "$raw"
nvidia-smi -L 2>/dev/null | sed 's/^/# /' >> "$raw"
for round in $(seq 1 "$ROUNDS"); do
    for layout in g np; do
        # rotate the variants' order every round
        n=${#variants[@]}
        for k in $(seq 0 $((n - 1))); do
            v=${variants[$(((k + round) % n))]}
            cli="$DEV/cli/jccl-cli.jar"
            [ "$v" = base ] && cli=$BASE_CLI
            env=()
            [ "$v" = none ] && env=(JCCL_CHECK=none)
            if [ "$layout" = g ]; then
                args=(-g "$NGPUS")
            else
                args=(-np "$NGPUS" --device cuda)
            fi
            tmp=$(mktemp)
            env "${env[@]}" timeout -k 10 120 "$JAVA" "${JOPTS[@]}" -jar "$cli" perf all_reduce "${args[@]}" -b 8 -e 256K -f 2 \
                -w 200 -n "$ITERS" -c 1 > "$tmp" 2>&1
            rc=$?
            echo "## round $round layout $layout variant $v rc=$rc" >> "$raw"
            sed -E 's/^\[0\] //' "$tmp" | awk -v p="$layout $v $round" '/^ *[0-9]+ +[0-9]+ +[a-z]/ { print p, $0; next } { print "#", $0 }' >> "$raw"
            [ $rc -ne 0 ] && echo "round $round $layout $v: rc=$rc (see $raw)"
            rm -f "$tmp"
        done
    done
    echo "round $round done ($SECONDS s)"
done
summarize "$raw" | tee "$OUT/summary.txt"
grep -c "^# .*Out of bounds values *: *[1-9]" "$raw" >/dev/null && echo "WRONG VALUES in some run: grep 'Out of bounds' $raw"
exit 0
