#!/usr/bin/env bash
# Prepares .device/ (git-ignored) with everything scripts/gpu-check.sh needs on the lent GPU machine,
# which has CUDA, python3 + the nvidia-nccl wheel, but no Java, no Maven and no network.
# Runs HERE, on the CPU machine, from any directory:
#
#   scripts/gpu-prep.sh                 clean build (offline first, online if that fails), pack, smoke-test
#   SKIP_BUILD=1 scripts/gpu-prep.sh    reuse the jars already in */target
#   SKIP_SMOKE=1 scripts/gpu-prep.sh   do not run the packed JRE + jars here afterwards
#
# Then carry .device with the device run, e.g. (run tool): carry [".device"],
#   command "scripts/gpu-check.sh tests sanitizer"   and later   "scripts/gpu-check.sh perf mproc"
#
# Layout written (all names without versions, so gpu-check.sh needs no globbing):
#   .device/jre25.tar.xz                 Java 25 runtime (../shared/tools/device-jre.sh; reused when present)
#   .device/cli/jccl-cli.jar + lib/      the jccl command (java -jar .device/cli/jccl-cli.jar perf|run ...)
#   .device/cli/jccl-examples.jar        CollectiveCheck, for scripts/torchrun-check.sh
#   .device/test/jccl-cuda.jar, jccl-cuda-tests.jar, jccl-core.jar, junit-platform-console-standalone.jar
#   .device/MANIFEST.txt                 commit, build time, every file with its size and sha256
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
dev=.device
limit_mib=${DEVICE_LIMIT_MIB:-60}

log() { echo "gpu-prep: $*"; }
die() { echo "gpu-prep: $*" >&2; exit 1; }

# 1. Build the jars from clean (no stale classes in the test jar); the tests are CI's job: skipped here.
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    log "building (./mvnw -q -B -o clean install -DskipTests)"
    if ! ./mvnw -q -B -o clean install -DskipTests; then
        log "offline build failed; retrying online (Maven Central)"
        ./mvnw -q -B clean install -DskipTests || die "the build failed; run ./mvnw -B install -DskipTests to see why"
    fi
fi

cli_jar=jccl-cli/target/jccl-cli.jar
cli_lib=jccl-cli/target/lib
cuda_jar=$(ls jccl-cuda/target/jccl-cuda-*.jar 2>/dev/null | grep -v -e '-tests\.jar$' -e '-sources\.jar$' -e '-javadoc\.jar$' | head -n 1 || true)
cuda_tests=$(ls jccl-cuda/target/jccl-cuda-*-tests.jar 2>/dev/null | head -n 1 || true)
core_jar=$(ls jccl-cuda/target/device-lib/jccl-core-*.jar 2>/dev/null | head -n 1 || true)
console=jccl-cuda/target/device-lib/junit-platform-console-standalone.jar
for f in "$cli_jar" "$cuda_jar" "$cuda_tests" "$core_jar" "$console"; do
    [ -n "$f" ] && [ -f "$f" ] || die "missing build output '${f:-jccl-cuda/target/...}': build first (drop SKIP_BUILD=1)"
done
[ -d "$cli_lib" ] || die "missing $cli_lib: build first"

# 2. The Java runtime. device-jre.sh lives in the steering checkout's shared/tools, one or two
#    levels above this checkout (a git worktree sits one level deeper than the main checkout).
jre_sh=${DEVICE_JRE_SH:-}
if [ -z "$jre_sh" ]; then
    for c in "$root/../shared/tools/device-jre.sh" "$root/../../shared/tools/device-jre.sh" /work/shared/tools/device-jre.sh; do
        if [ -f "$c" ]; then jre_sh=$c; break; fi
    done
fi
[ -n "$jre_sh" ] && [ -f "$jre_sh" ] || die "device-jre.sh not found (looked in ../shared/tools and ../../shared/tools); set DEVICE_JRE_SH=/path/to/device-jre.sh"
log "Java runtime: $jre_sh $dev"
bash "$jre_sh" "$dev" >/dev/null
[ -f "$dev/jre25.tar.xz" ] || die "$jre_sh did not write $dev/jre25.tar.xz"
# Belt and braces: .gitignore lists .device/, and in a worktree git reads info/exclude from the common dir.
if git rev-parse --git-dir >/dev/null 2>&1 && ! git check-ignore -q "$dev/jre25.tar.xz"; then
    ex=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$ex")"
    echo "/$dev/" >> "$ex"
fi

# 3. Assemble.
rm -rf "$dev/cli" "$dev/test"
mkdir -p "$dev/cli/lib" "$dev/test"
cp "$cli_jar" "$dev/cli/jccl-cli.jar"
cp "$cli_lib"/*.jar "$dev/cli/lib/"
cp "$cuda_jar" "$dev/test/jccl-cuda.jar"
cp "$cuda_tests" "$dev/test/jccl-cuda-tests.jar"
cp "$core_jar" "$dev/test/jccl-core.jar"
cp "$console" "$dev/test/junit-platform-console-standalone.jar"
# CollectiveCheck, the every-collective correctness program that scripts/torchrun-check.sh runs under torchrun.
examples_jar=$(ls examples/target/jccl-examples-*.jar 2>/dev/null | grep -v -e '-sources\.jar$' -e '-javadoc\.jar$' | head -n 1 || true)
[ -n "$examples_jar" ] && cp "$examples_jar" "$dev/cli/jccl-examples.jar"

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo " (with uncommitted changes)" || true)
{
    echo "jccl device bundle"
    echo "commit: $commit$dirty ($(git log -1 --format=%s 2>/dev/null | cut -c1-100))"
    echo "built: $(date -u +%FT%TZ) on $(hostname)"
    echo "files:"
    (cd "$dev" && find . -type f ! -name MANIFEST.txt | sort | while read -r f; do
        printf '  %10s  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "${f#./}"
    done)
} > "$dev/MANIFEST.txt"

# 4. Smoke test: the packed runtime starts, and runs the console launcher on the test jar here
#    (the GPU tests skip without a GPU; CudaDriverTest's CPU checks run).
if [ "${SKIP_SMOKE:-0}" != 1 ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    tar -xJf "$dev/jre25.tar.xz" -C "$tmp"
    java="$tmp/jre25/bin/java"
    "$java" -version 2>&1 | head -n 1 | sed 's/^/gpu-prep: packed runtime: /'
    cp="$dev/test/jccl-cuda.jar:$dev/test/jccl-cuda-tests.jar:$dev/test/jccl-core.jar"
    if ! "$java" --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -jar "$dev/test/junit-platform-console-standalone.jar" execute \
            --disable-banner --disable-ansi-colors --details=summary --class-path "$cp" \
            --select-class org.jccl.cuda.CudaDriverTest --select-class org.jccl.cuda.GpuCollectivesTest >"$tmp/smoke.txt" 2>&1; then
        cat "$tmp/smoke.txt" >&2
        die "smoke test: the JUnit console failed with the packed runtime"
    fi
    grep -E 'tests (successful|failed|aborted)' "$tmp/smoke.txt" | tr -s ' []' ' ' | paste -sd, | sed 's/^/gpu-prep: smoke test of the JUnit console:/' || true
    if ! "$java" --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -jar "$dev/cli/jccl-cli.jar" perf all_reduce -np 2 -b 8 -e 1K -f 4 -n 2 -w 1 \
            --jit-warmup 0 >"$tmp/perf.txt" 2>&1; then
        cat "$tmp/perf.txt" >&2
        die "smoke test: jccl perf (CPU, 2 ranks) failed with the packed runtime"
    fi
    grep -m1 'Avg bus bandwidth' "$tmp/perf.txt" | sed 's/^# */gpu-prep: smoke test, jccl perf on the CPU: /' || true
fi

# 5. Sizes.
echo "gpu-prep: $dev/ contents:"
(cd "$dev" && du -ab . | sort -k2 | grep -v '/\.$' | awk '$2 != "." { printf "  %8.2f MiB  %s\n", $1 / 1048576, substr($2, 3) }')
total=$(du -sb "$dev" | cut -f1)
awk -v t="$total" -v l="$limit_mib" 'BEGIN { printf "gpu-prep: total %.1f MiB (limit %d MiB)\n", t / 1048576, l }'
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
    die "$dev/ is larger than $limit_mib MiB: the device run carries at most 64 MiB"
fi
echo "gpu-prep: ready. On the GPU machine (carry .device), from the repository root:"
echo "  scripts/gpu-check.sh tests sanitizer     # correctness (~4-7 min)"
echo "  scripts/gpu-check.sh perf mproc          # performance tables (~5-9 min)"
