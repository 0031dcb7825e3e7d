#!/usr/bin/env bash
# Prints the state of a CPU pair (cache-line round trip; bandwidth of rewriting memory the other CPU
# just read): run it before and after a CPU benchmark to tell which state the host gave the VM (see
# docs/PERFORMANCE.md, "The 8 MB row"). Usage: scripts/cpu-pair-state.sh [CPU_A CPU_B]  (default 0 1)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${TMPDIR:-/tmp}/jccl-cpu-pair-state-$(id -u)"
if [ ! -x "$bin" ] || [ "$here/cpu-pair-state.c" -nt "$bin" ]; then
    cc -O2 -o "$bin" "$here/cpu-pair-state.c"
fi
exec "$bin" "$@"
