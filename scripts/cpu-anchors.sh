#!/usr/bin/env bash
# Runs the CPU anchors (Open MPI shared memory and TCP, Gloo) and jccl's all-reduce side by side,
# in one sitting, 2 ranks on this host, float32 sum, 8 B .. 64 MiB (x4). Output: one block each.
# Needs: apt-get install -y openmpi-bin libopenmpi-dev python3-torch   (see ../shared/anchors/README.md)
# Usage: scripts/cpu-anchors.sh [NP]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
np=${1:-2}
anchors=${ANCHORS:-../shared/anchors}
mpi=$(mktemp -d)/mpi_allreduce
mpicc -O2 -o "$mpi" "$anchors/mpi_allreduce.c"
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
# The host moves the VM's CPU pair between a near and a far state (docs/PERFORMANCE.md, "The 8 MB
# row"); the state before and after each block says which one a block ran in.
state() { echo "# state: $(scripts/cpu-pair-state.sh 0 1 2>&1)"; }
state
echo "### Open MPI shared memory (median of blocking ops, barrier before each)"
mpirun --allow-run-as-root --oversubscribe -np "$np" "$mpi" 8 67108864
state
echo "### Open MPI TCP loopback (same method)"
mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self -np "$np" "$mpi" 8 67108864
state
echo "### Gloo (PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null), same method)"
/usr/bin/python3 "$anchors/gloo_allreduce.py" "$np" 8 67108864 2>&1 | grep -v Warning
state
echo "### jccl (shared memory between the ranks of this host), --timing median (the anchors' method)"
bin/jccl perf all_reduce -np "$np" -b 8 -e 64M -f 4 -n 100 --timing median
state
echo "### jccl TCP loopback (JCCL_SHM_DISABLE=1), --timing median"
JCCL_SHM_DISABLE=1 bin/jccl perf all_reduce -np "$np" -b 8 -e 64M -f 4 -n 100 --timing median
state
echo "### jccl (shared memory), --timing median with the anchors' buffers: one size per run (-b = -e), so every"
echo "### operation reuses the same send and receive buffers, as the anchors do (the runs above rotate through -e bytes, as nccl-tests does)"
for s in 8K 32K 128K 512K 2M 8M 32M 64M; do
    printf '%s, ' "$(scripts/cpu-pair-state.sh 0 1 | grep -o 'round trip [0-9]* ns')"
    bin/jccl perf all_reduce -np "$np" -b $s -e $s -n 100 --timing median | grep -E '^ +[0-9]'
done
state
echo "### jccl (shared memory), nccl-tests method (mean of 20 back-to-back async ops)"
bin/jccl perf all_reduce -np "$np" -b 8 -e 64M -f 4
state
echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
