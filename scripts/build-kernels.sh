#!/usr/bin/env bash
# Builds jccl's GPU kernels (jccl-cuda/src/main/cuda/*.cu) into the fatbin that jccl-cuda loads:
# sm_90 machine code (H100/H200) plus compute_90 PTX, which the driver compiles for newer GPUs.
# The result and a stamp (SHA-256 of the sources and of these flags, then of the fatbin) are
# committed, so machines without nvcc build jccl too; CudaKernelsTest fails when the sources
# change without a rebuild.
#
#   scripts/build-kernels.sh          build (needs nvcc, CUDA 12.4+)
#   scripts/build-kernels.sh --check  only say whether the committed fatbin matches the sources
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
src="$root/jccl-cuda/src/main/cuda"
out="$root/jccl-cuda/src/main/resources/org/jccl/cuda"
flags="-O3 -std=c++17 -Xfatbin=-compress-all -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"

sources_hash() {
    (cd "$src" && LC_ALL=C ls *.cu *.cuh 2>/dev/null | LC_ALL=C sort | while read -r f; do
        printf '%s\n' "$f"; cat "$f"; done; printf 'flags: %s\n' "$flags") | sha256sum | cut -d' ' -f1
}

if [ "${1:-}" = "--check" ]; then
    want=$(sed -n 's/^sources: //p' "$out/jccl_kernels.stamp")
    have=$(sources_hash)
    [ "$want" = "$have" ] && echo "fatbin matches its sources" && exit 0
    echo "fatbin is stale: rebuild with scripts/build-kernels.sh" >&2
    exit 1
fi

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "nvcc not found (set NVCC=...); the committed fatbin stays as it is" >&2; exit 1; }
mkdir -p "$out" "$root/jccl-cuda/target"
# shellcheck disable=SC2086
"$nvcc" -fatbin $flags -o "$out/jccl_kernels.fatbin" "$src/jccl_kernels.cu"
# Resource usage report, kept beside the build for review (registers, spills).
# shellcheck disable=SC2086
"$nvcc" -cubin -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v -o /dev/null "$src/jccl_kernels.cu" \
    2>"$root/jccl-cuda/target/ptxas.txt" || true
{
    echo "sources: $(sources_hash)"
    echo "fatbin: $(sha256sum "$out/jccl_kernels.fatbin" | cut -d' ' -f1)"
    echo "nvcc: $("$nvcc" --version | tail -1)"
} >"$out/jccl_kernels.stamp"
ls -la "$out/jccl_kernels.fatbin"
cat "$out/jccl_kernels.stamp"
