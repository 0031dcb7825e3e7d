#!/usr/bin/env bash
# Usage: scripts/tcp-three-way.sh   (about a minute; needs openmpi-bin, libopenmpi-dev, UCX for the third)
# 2 ranks on this machine, all_reduce float32 8 B..64 MiB x4, median method: Open MPI (btl tcp,self),
# jccl TCP (JCCL_HOSTID=a,b), jccl over UCX tcp (JCCL_NET=UCX JCCL_UCX_TLS=tcp); 3 rounds, order rotated.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mpi=$(mktemp -d)/mpi_allreduce
mpicc -O2 -o "$mpi" "${ANCHORS:-../shared/anchors}/mpi_allreduce.c" || { echo "tcp-three-way: mpicc missing: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }
for r in 1 2 3; do
  for k in 0 1 2; do
    w=$(( (k + r) % 3 ))
    st=$(scripts/cpu-pair-state.sh 0 1 | grep -o 'round trip [0-9]* ns')
    case $w in
      0) echo "### round $r ompi $(date -u +%T) $st"
         mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self -np 2 "$mpi" 8 67108864 ;;
      1) echo "### round $r jccl-tcp $(date -u +%T) $st"
         JCCL_HOSTID=a,b bin/jccl perf all_reduce -np 2 -b 8 -e 64M -f 4 -n 100 --timing median | grep -E '^ +[0-9]' ;;
      2) echo "### round $r jccl-ucx $(date -u +%T) $st"
         JCCL_NET=UCX JCCL_UCX_TLS=tcp JCCL_HOSTID=a,b bin/jccl perf all_reduce -np 2 -b 8 -e 64M -f 4 -n 100 --timing median | grep -E '^ +[0-9]' ;;
    esac
  done
done
