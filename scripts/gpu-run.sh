#!/usr/bin/env bash
# Runs the whole suite once from a bundle that `just pack-gpu` built (release
# programs and test harnesses, no cargo needed), on a machine with an NVIDIA GPU,
# its driver and a Python environment with PyTorch's CUDA 13 wheels (for
# nvidia/cu13/lib). Made for a short lease on a lent GPU:
#
#   - OUT_DIR ends with three files: summary.md (the table to read first),
#     results.tar.gz (every JSON, log and nvidia-smi's output) and run.log. The
#     lent machine returns at most 8 files; both are rewritten after every step,
#     so a run cut short still leaves what it measured.
#   - Every step has its own timeout, clamped to a budget for the whole run
#     (default 450 s, under 8 minutes with start-up): a hang loses that step only.
#   - The steps are found in the bundle: every program in experiments/ with its
#     defaults, a few extra runs (matmul at 8192 in every precision, cpu_vs_gpu
#     at 8192), every test harness in tests/, PyTorch's pytorch/matmul.py when
#     packed (same settings as the 8192 matmul), and tools/compare on the two,
#     printed last. A failed step does not stop the others; the exit code is 1
#     when any step failed.
#
# Usage: scripts/gpu-run.sh OUT_DIR [BUNDLE]          on the GPU machine
#        scripts/gpu-run.sh --cpu OUT_DIR [BUNDLE]    the same steps on the CPU, small
#                                                     sizes (`just pack-cpu`; CI runs it)
#   BUNDLE defaults to .gpu-bundle/candle-lab-cuda.tar.xz (-cpu with --cpu).
#   CANDLE_LAB_CUDA_LIB=/path/to/cu13/lib overrides the library search.
#   CANDLE_LAB_RUN_BUDGET_S: seconds for the whole run (450; 150 with --cpu).
#   CANDLE_LAB_STEP_TIMEOUT_S: caps every step's timeout (CI: a hanging program).
set -euo pipefail

mode=cuda
if [[ ${1:-} == --cpu ]]; then
  mode=cpu
  shift
fi
usage="usage: scripts/gpu-run.sh [--cpu] OUT_DIR [BUNDLE]"
out=${1:?$usage}
bundle=${2:-.gpu-bundle/candle-lab-$mode.tar.xz}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The repository root, as the README runs this: the library tests read its
# results/ and schema/ (linked into their working folder below).
start=$PWD
rm -f "$out/summary.md" "$out/results.tar.gz" "$out/run.log"
exec > >(tee "$out/run.log") 2>&1

if [[ $mode == cuda ]]; then
  budget=${CANDLE_LAB_RUN_BUDGET_S:-450}
  device=cuda
  t_program=150 t_test=180 t_python=150
else
  budget=${CANDLE_LAB_RUN_BUDGET_S:-150}
  device=cpu
  t_program=60 t_test=120 t_python=60
fi
t_cap=${CANDLE_LAB_STEP_TIMEOUT_S:-0}
reserve=15 # seconds kept for the last summary and archive
deadline=$((SECONDS + budget))

[[ -f $bundle ]] || { echo "error: no bundle at $bundle (build it with 'just pack-$([[ $mode == cpu ]] && echo cpu || echo gpu)')"; exit 1; }
bin=$(mktemp -d)
work=$(mktemp -d)/results
mkdir -p "$work/logs"
trap 'rm -rf "$bin" "$(dirname "$work")"' EXIT
tar -xf "$bundle" -C "$bin" # xz from pack.sh; tar finds the compression itself
echo "bundle: $bundle ($(du -h "$bundle" | cut -f1)): $(tr '\n' ' ' < "$bin/BUNDLE")"
kind=$(sed -n 's/^kind=//p' "$bin/BUNDLE")
[[ $kind == "$mode" ]] || { echo "error: $bundle is a $kind bundle; this is a $mode run"; exit 1; }
cp "$bin/BUNDLE" "$work/BUNDLE"
printf 'step\texit\tseconds\tnote\tcommand\n' > "$work/steps.tsv"

# Writes summary.md and results.tar.gz into OUT_DIR from what the work folder holds now.
# A failure here is reported, never the end of the run.
snapshot() {
  if python3 "$bin/scripts/summary.py" "$work" "$SECONDS" > "$work/summary.md.tmp"; then
    mv "$work/summary.md.tmp" "$work/summary.md"
    cp "$work/summary.md" "$out/.summary.md.tmp" && mv "$out/.summary.md.tmp" "$out/summary.md"
  else
    echo "warning: summary.py failed; summary.md is from the step before"
  fi
  cp "$out/run.log" "$work/run.log" 2>/dev/null || true
  tar -czf "$out/.results.tar.gz.tmp" -C "$(dirname "$work")" results &&
    mv "$out/.results.tar.gz.tmp" "$out/results.tar.gz" || echo "warning: could not write results.tar.gz"
}

failed=()
record() { # NAME EXIT SECONDS NOTE COMMAND...
  local name=$1 rc=$2 secs=$3 note=$4
  shift 4
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$note" "$*" >> "$work/steps.tsv"
}

# step NAME TIMEOUT_S [--informational] COMMAND...: runs COMMAND under its own
# timeout (clamped to what is left of the budget), its output to the log and to
# logs/NAME.log, and records its exit code and seconds.
step() {
  local name=$1 limit=$2 counts=yes
  shift 2
  if [[ $1 == --informational ]]; then
    counts=no
    shift
  fi
  local left=$((deadline - SECONDS - reserve))
  ((t_cap > 0 && limit > t_cap)) && limit=$t_cap
  ((limit > left)) && limit=$left
  if ((left < 5)); then
    echo "=== $name: skipped, the run's ${budget} s budget is spent"
    record "$name" - 0 "skipped: budget spent" "$@"
    [[ $counts == yes ]] && failed+=("$name (not run)")
    return 0
  fi
  echo "=== $name (timeout ${limit} s): ${*#"$bin/"}"
  local start=$EPOCHREALTIME rc=0
  set +e
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$work/logs/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  local secs
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  local note=""
  case $rc in
    0) ;;
    3) note="some rows failed (see their errors)" ;;
    124 | 137) note="timed out after ${limit} s" ;;
    *) note="failed" ;;
  esac
  [[ $counts == no && $rc != 0 ]] && note="$note (informational: not counted)"
  echo "=== $name: exit $rc, ${secs} s${note:+, $note}"
  record "$name" "$rc" "$secs" "$note" "${@#"$bin/"}"
  if [[ $rc != 0 && $counts == yes ]]; then
    failed+=("$name (exit $rc)")
  fi
  snapshot
}

# The machine: CUDA libraries, architecture, nvidia-smi.
if [[ $mode == cuda ]]; then
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
  for exe in "$bin"/experiments/*; do
    missing=$(ldd "$exe" | grep 'not found' || true)
    [[ -z $missing ]] || { echo "error: $(basename "$exe"): libraries not found:"; echo "$missing"; exit 1; }
  done
  # A bundle's kernels load only on the GPUs its architecture allows (README, On a GPU).
  want=$(sed -n 's/^compute_cap=//p' "$bin/BUNDLE")
  arch=$(sed -n 's/^arch=//p' "$bin/BUNDLE")
  have=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
  [[ $have =~ ^[0-9]+$ ]] || { echo "error: nvidia-smi gave no compute capability ('$have')"; exit 1; }
  if [[ $arch == *[af] && $have != "$want" ]] || ((have < want)); then
    echo "error: this GPU is compute capability $have; the bundle's kernels are $arch. Build one for it: just pack-gpu $have"
    exit 1
  fi
  step nvidia-smi 30 nvidia-smi
  nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv > "$work/gpu.csv" || true
  cp "$work/logs/nvidia-smi.log" "$work/nvidia-smi.txt"
fi

# Every experiment with its defaults (small sizes on the CPU: the flags it has).
for exe in "$bin"/experiments/*; do
  name=$(basename "$exe")
  args=(--device "$device" --output "$work/$name.json")
  if [[ $mode == cpu ]]; then
    help=$(timeout 5 "$exe" --help 2>/dev/null || true)
    # Whole flag names only: `--size` is not `--sizes`.
    has() { [[ $help =~ (^|[[:space:]])$1([[:space:]]|=|$) ]]; }
    if has --size; then args+=(--size 128); fi
    if has --sizes; then args+=(--sizes 64,96,128); fi
    if has --max-seconds; then args+=(--max-seconds 0.2); fi
    if has --iters; then args+=(--iters 3); fi
    if has --warmup; then args+=(--warmup 1); fi
    # memory and overhead (CI's CPU bundle is a dev build: their defaults take minutes)
    if has --mib; then args+=(--mib 1); fi
    if has --matmul-size; then args+=(--matmul-size 128); fi
    if has --transfer-max-mib; then args+=(--transfer-max-mib 1); fi
    if has --first-size; then args+=(--first-size 128); fi
    if has --calls; then args+=(--calls 20); fi
    if has --cache-sizes; then args+=(--cache-sizes 64,128); fi
    if has --flush-mib; then args+=(--flush-mib 4); fi
  fi
  step "$name" "$t_program" "$exe" "${args[@]}"
done

# The extra runs: matmul in every precision at 8192, cpu_vs_gpu at 8192. The GPU
# machine's memory grows on demand, so the host check is skipped there.
if [[ $mode == cuda ]]; then
  matmul_args=(--size 8192 --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --no-cpu)
  cpu_vs_gpu_args=(--size 8192 --iters 20 --warmup 5)
  grows=(--skip-host-memory-check)
else
  matmul_args=(--size 192 --iters 3 --warmup 1 --dtypes fp64,fp32,fp16,bf16)
  cpu_vs_gpu_args=(--size 192 --iters 4 --warmup 1)
  grows=()
fi
size=${matmul_args[1]}
if [[ -x $bin/experiments/matmul ]]; then
  step "matmul-$size" "$t_program" "$bin/experiments/matmul" --device "$device" "${matmul_args[@]}" \
    "${grows[@]}" --output "$work/matmul-$size.json"
fi
if [[ -x $bin/experiments/cpu_vs_gpu ]]; then
  step "cpu_vs_gpu-$size" "$t_program" "$bin/experiments/cpu_vs_gpu" --device "$device" \
    "${cpu_vs_gpu_args[@]}" "${grows[@]}" --output "$work/cpu_vs_gpu-$size.json"
fi

# The PyTorch reference, with the machine's python3, at the 8192 matmul's settings.
pytorch_json=""
if [[ -f $bin/pytorch/matmul.py ]]; then
  if python3 -c 'import torch' 2>/dev/null; then
    pytorch_json="$work/pytorch-matmul-$size.json"
    step "pytorch-matmul-$size" "$t_python" python3 "$bin/pytorch/matmul.py" --device "$device" \
      "${matmul_args[@]}" --output "$pytorch_json"
  else
    echo "=== pytorch-matmul-$size: skipped, python3 has no torch"
    record "pytorch-matmul-$size" - 0 "skipped: python3 has no torch (not counted)" python3 pytorch/matmul.py
  fi
fi

# The packed test harnesses, one test at a time (they share one GPU); the CLI
# tests find the programs through CANDLE_LAB_BIN_DIR.
export CANDLE_LAB_BIN_DIR="$bin/experiments"
scratch=$(dirname "$work")/scratch # the tests' working folder, not archived
mkdir -p "$scratch"
for d in results schema; do
  if [[ -d $start/$d && ! -e $scratch/$d ]]; then ln -s "$start/$d" "$scratch/$d"; fi
done
cd "$scratch"
for t in "$bin"/tests/*; do
  step "test-$(basename "$t")" "$t_test" "$t" --test-threads 1
done

# Last: the comparison of Candle with PyTorch, when both the tool and the files exist.
if [[ -x $bin/tools/compare && -n $pytorch_json && -f $pytorch_json && -f $work/matmul-$size.json ]]; then
  step compare 60 --informational "$bin/tools/compare" "$work/matmul-$size.json" "$pytorch_json"
fi

snapshot
echo
cat "$out/summary.md"
if [[ -f $work/logs/compare.log ]]; then
  echo
  echo "=== compare matmul-$size.json pytorch-matmul-$size.json"
  cat "$work/logs/compare.log"
fi
snapshot
echo "OUT_DIR: $(ls "$out" | tr '\n' ' ')($(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1))"
if ((${#failed[@]})); then
  echo "failed: ${failed[*]}"
  exit 1
fi
echo "every step passed"
