#!/usr/bin/env bash
# Interleaved A/B of two jccl builds over TCP: 2 ranks with two host identities (JCCL_HOSTID=a,b, so
# the pair talks TCP), all_reduce float sum, one size per run (the anchors' buffers), median timing;
# the order of the two builds alternates per round. Prints "round R A|B bytes oop_us ip_us" lines.
# Usage: scripts/tcp-ab.sh A.jar B.jar      (each jar with its lib/ beside it, as jccl-cli/target has)
# Environment: ROUNDS=3, SIZES="8 128K 2M 8M", N=100 (timed operations), EXTRA="VAR=value ..." (both builds)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -eq 2 ] && [ -f "$1" ] && [ -f "$2" ] || { echo "usage: scripts/tcp-ab.sh A.jar B.jar" >&2; exit 2; }
# shellcheck source=bin/jdk25.sh
. bin/jdk25.sh
jccl_find_jdk25 || exit 1
jars=("$1" "$2")
names=(A B)
for r in $(seq 1 "${ROUNDS:-3}"); do
    for s in ${SIZES:-8 128K 2M 8M}; do
        for k in 0 1; do
            i=$(( (k + r) % 2 ))
            # shellcheck disable=SC2086
            line=$(env ${EXTRA:-} JCCL_HOSTID=a,b timeout -k 10 300 "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED \
                --add-modules jdk.incubator.vector -XX:+UseParallelGC -jar "${jars[$i]}" perf all_reduce -np 2 -b "$s" -e "$s" \
                -n "${N:-100}" --timing median 2>&1 | awk '/^ +[0-9]+ +[0-9]+ +float/ {print $1, $6, $10}')
            echo "round $r ${names[$i]} ${line:-failed}"
        done
    done
done
