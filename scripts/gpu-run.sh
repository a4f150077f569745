#!/usr/bin/env bash
# Runs the whole suite once on a machine with an NVIDIA GPU and its driver, but
# no cargo and no network: it takes the release binaries that `just pack-gpu`
# built with the `cuda` feature and xz-packed, finds CUDA 13 libraries in a
# Python environment that has PyTorch's CUDA 13 wheels (nvidia/cu13/lib), and
# writes every JSON report, nvidia-smi's output and a log into OUT_DIR.
#
# Usage: scripts/gpu-run.sh OUT_DIR [BUNDLE]
#   BUNDLE defaults to .gpu-bundle/candle-lab-cuda.tar.xz
#   CANDLE_LAB_CUDA_LIB=/path/to/cu13/lib overrides the library search.
# Takes a few minutes on an H100/H200: the reference defaults (4096, 20 iters,
# 5 warm-up) for every experiment, then matmul and cpu_vs_gpu at 8192, then
# memory and overhead at their GPU defaults.
set -euo pipefail

out=${1:?usage: scripts/gpu-run.sh OUT_DIR [BUNDLE]}
bundle=${2:-.gpu-bundle/candle-lab-cuda.tar.xz}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1

[[ -f $bundle ]] || { echo "error: no bundle at $bundle (build it with 'just pack-gpu')"; exit 1; }
bin=$(mktemp -d)
tar -xJf "$bundle" -C "$bin"

find_cu13() {
  python3 - <<'PY'
import os, site, sys
roots = []
try:
    import nvidia  # namespace package of NVIDIA's wheels
    roots += list(nvidia.__path__)
except ImportError:
    pass
roots += [os.path.join(p, "nvidia") for p in site.getsitepackages() + [site.getusersitepackages()]]
for root in roots:
    lib = os.path.join(root, "cu13", "lib")
    if os.path.exists(os.path.join(lib, "libcublas.so.13")):
        print(lib)
        sys.exit(0)
sys.exit(1)
PY
}
cu13=${CANDLE_LAB_CUDA_LIB:-$(find_cu13 || true)}
[[ -n $cu13 ]] || { echo "error: no nvidia/cu13/lib with libcublas.so.13 found by python3; set CANDLE_LAB_CUDA_LIB"; exit 1; }
export LD_LIBRARY_PATH="$cu13${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "CUDA libraries: $cu13"

missing=$(ldd "$bin/matmul" | grep 'not found' || true)
[[ -z $missing ]] || { echo "error: libraries not found:"; echo "$missing"; exit 1; }

nvidia-smi | tee "$out/nvidia-smi.txt"

# One failing experiment does not stop the others: a GPU lease is short.
failed=()
run() {
  echo "+ $*"
  local rc=0
  "$@" || rc=$?
  ((rc == 0)) || failed+=("$(basename "$1") (exit $rc)")
}
run "$bin/basics" --device cuda --output "$out/basics.json"
run "$bin/precision" --device cuda --output "$out/precision.json"
run "$bin/matmul" --device cuda --size 4096 --iters 20 --warmup 5 \
  --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --output "$out/matmul.json"
run "$bin/cpu_vs_gpu" --device cuda --size 4096 --iters 20 --warmup 5 --output "$out/cpu_vs_gpu.json"
run "$bin/matmul" --device cuda --size 8192 --iters 20 --warmup 5 --no-cpu \
  --dtypes fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --output "$out/matmul-8192.json"
run "$bin/cpu_vs_gpu" --device cuda --size 8192 --iters 20 --warmup 5 --output "$out/cpu_vs_gpu-8192.json"
# Each in its own fresh process: overhead's first calls must be the process's first.
run "$bin/memory" --device cuda --output "$out/memory.json"
run "$bin/overhead" --device cuda --output "$out/overhead.json"

# The tests packed with the binaries (library unit tests with their CUDA
# variants, the memory-pool test), one thread so they do not share the GPU.
for t in "$bin"/test-*; do
  [[ -x $t ]] && run "$t" --test-threads 1
done
echo "wrote: $(ls "$out" | tr '\n' ' ')"
if ((${#failed[@]})); then
  echo "failed: ${failed[*]}"
  exit 1
fi
