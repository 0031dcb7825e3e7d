#!/usr/bin/env bash
# The async path against one-by-one operations (issue 19, item 4): jccl perf's default method
# (nccl-tests': -n operations issued back to back, then one wait) beside --timing median (each
# operation timed alone after a barrier), all_reduce float sum 8 B .. 64 MiB (x2), NP local ranks,
# ROUNDS rounds, each round running every given CLI jar in both methods, interleaved. Prints, per jar
# and round, default/median per size (out of place and in place) and the worst ratio.
#
# With TIMING=paired, each round is one run of `--timing paired`: per size both methods alternate three
# times inside the same ranks (this host's two vCPUs switch between a fast and a slow state every
# few tens of seconds, see the state lines, so two separate runs can see different machines); the
# ratio per cell is then the median of the three pairs' ratios.
#
# Usage: [TIMING=paired] scripts/async-ratio.sh NP ROUNDS JAR [JAR...]
#   JAR: a jccl-cli.jar with its lib/ folder beside it (jccl-cli/target/jccl-cli.jar after a build;
#   copy the jar and lib/ of another build elsewhere to compare builds). Raw tables go to $OUT
#   (default: a new directory under /tmp), with the load and the host's CPU-pair state of each run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
np=$1; rounds=$2; shift 2
. bin/jdk25.sh
jccl_find_jdk25 >/dev/null || exit 1
out=${OUT:-$(mktemp -d /tmp/async-ratio.XXXXXX)}
mkdir -p "$out"
echo "# raw tables in $out"
for r in $(seq 1 "$rounds"); do
    j=0
    for jar in "$@"; do
        j=$((j + 1))
        methods="mean median"
        [ "${TIMING:-}" = paired ] && methods=paired
        for timing in $methods; do
            f="$out/jar$j-$timing-np$np-r$r.txt"
            { echo "# jar $jar"; echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)";
              echo "# state: $(scripts/cpu-pair-state.sh 0 1 2>&1 || true)"; } > "$f"
            "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -jar "$jar" \
                perf all_reduce -np "$np" -b 8 -e 64M -f 2 --timing "$timing" >> "$f" 2>&1
        done
    done
done
/usr/bin/env python3 - "$out" "$np" "$@" <<'PY'
import glob, os, re, sys
out, np_, jars = sys.argv[1], sys.argv[2], sys.argv[3:]
def paired(f):
    r = {}
    for line in open(f):
        p = line.split()
        if line.startswith('#paired '):
            size, var = int(p[1]), p[2]
            r.setdefault(size, {})[var] = (float(p[4]), float(p[6]), float(p[8]), p[10:])
    return r
def rows(f):
    r = {}
    for line in open(f):
        p = line.split()
        if len(p) >= 13 and p[0].isdigit() and not line.startswith('#'):
            r[int(p[0])] = (float(p[5]), float(p[9]))
    return r
for j, jar in enumerate(jars, 1):
    pr = sorted({int(m.group(1)) for f in glob.glob(f"{out}/jar{j}-paired-np{np_}-r*.txt")
                 for m in [re.search(r'-r(\d+)\.txt$', f)]})
    if pr:
        print(f"## {jar}, {np_} ranks, paired: default / median us, median of 3 pair ratios (out of place | in place), rounds {pr}")
        data = {r: paired(f"{out}/jar{j}-paired-np{np_}-r{r}.txt") for r in pr}
        worst = 0.0
        for s in sorted(set().union(*[set(d) for d in data.values()])):
            cells = []
            for r in pr:
                d = data[r].get(s, {})
                if 'out' not in d or 'in' not in d:
                    cells.append("-")
                    continue
                o, i = d['out'], d['in']
                worst = max(worst, o[2], i[2])
                cells.append(f"{o[0]:.4g}/{o[1]:.4g} {o[2]:.2f} | {i[0]:.4g}/{i[1]:.4g} {i[2]:.2f}")
            print(f"{s:>10}  " + "  ||  ".join(cells))
        print(f"worst ratio: {worst:.2f}")
        continue
    rounds = sorted({int(m.group(1)) for f in glob.glob(f"{out}/jar{j}-mean-np{np_}-r*.txt")
                     for m in [re.search(r'-r(\d+)\.txt$', f)]})
    print(f"## {jar}, {np_} ranks: default / median, us per operation (out of place | in place), rounds {rounds}")
    data = {r: (rows(f"{out}/jar{j}-mean-np{np_}-r{r}.txt"), rows(f"{out}/jar{j}-median-np{np_}-r{r}.txt")) for r in rounds}
    worst = 0.0
    sizes = sorted(set().union(*[set(d[0]) for d in data.values()]))
    for s in sizes:
        cells = []
        for r in rounds:
            a, b = data[r][0].get(s), data[r][1].get(s)
            if a is None or b is None:
                cells.append("-")
                continue
            ro, ri = a[0] / b[0], a[1] / b[1]
            worst = max(worst, ro, ri)
            cells.append(f"{a[0]:.4g}/{b[0]:.4g} {ro:.2f} | {a[1]:.4g}/{b[1]:.4g} {ri:.2f}")
        print(f"{s:>10}  " + "  ||  ".join(cells))
    print(f"worst ratio: {worst:.2f}")
PY
