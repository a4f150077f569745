#!/usr/bin/env bash
# shellcheck disable=SC2054,SC2317,SC2012 # flag values hold commas; traps call functions
# Runs the whole suite once from a bundle that `just pack-gpu` built (release
# programs and test harnesses, no cargo needed), on a machine with an NVIDIA GPU,
# its driver and a python3 with PyTorch's CUDA 13 wheels (for nvidia/cu13/lib).
# Made for a short lease on a lent GPU:
#
#   - Everything is checked before anything is written: the bundle (unpacked
#     with xz, or with python3 where xz is missing, then every file against its
#     checksum), the driver (libcuda.so.1 from the linker's cache or the driver's
#     folder, nvidia-smi on PATH or in that folder), the CUDA libraries, the GPU's
#     architecture. OUT_DIR must be new or empty: an earlier run is never touched.
#   - OUT_DIR ends with three files: summary.md (the table to read first),
#     results.tar.gz (every JSON, log and nvidia-smi's output) and run.log. The
#     lent machine returns at most 8 files; both are rewritten after every step,
#     and a run that stops (a failed check, Ctrl-C, SIGTERM) still ends with its
#     summary, saying why it stopped.
#   - Every step has its own timeout, clamped to a budget for the steps (default
#     450 s; the whole call, with the machine's start and the transfers, takes
#     about 10 minutes: docs/gpu.md): a hang loses that step only. SIGINT or
#     SIGTERM stops the running step (its whole process group), runs no other,
#     and exits 130 or 143 after the summary.
#   - The steps (the plan, below) are found in the bundle: every program in
#     experiments/ with its preset (--preset gpu-call; small under --cpu), the extra runs (matmul at 8192 in every
#     precision, cpu_vs_gpu at 8192), PyTorch's pytorch/matmul and pytorch/block
#     when packed, each followed at once by tools/compare on the Candle and
#     PyTorch files, then every test harness in tests/. On the GPU every program
#     whose --help lists --skip-host-memory-check gets it (that machine's memory
#     grows on demand), and the driver's JIT cache is a folder of the run's own
#     (CUDA_CACHE_PATH). A failed step does not stop the others; the exit code is
#     1 when any step failed.
#
# Usage: scripts/gpu-run.sh OUT_DIR [BUNDLE]              on the GPU machine
#        scripts/gpu-run.sh --cpu OUT_DIR [BUNDLE]        the same steps on the CPU, small
#                                                         sizes (`just pack-cpu`; CI runs it)
#        scripts/gpu-run.sh --rehearse OUT_DIR [BUNDLE]   the GPU call's every step with its
#                                                         exact arguments, each stopped after
#                                                         checking them (--dry-run; a test
#                                                         harness lists its tests): CI runs it
#                                                         with stand-ins for the driver
#   BUNDLE defaults to .gpu-bundle/candle-lab-cuda.tar.xz (-cpu with --cpu).
#   CANDLE_LAB_CUDA_LIB=/path/to/cu13/lib overrides the CUDA library search.
#   CANDLE_LAB_DRIVER_ROOT: the driver's folder (default /usr/local/nvidia).
#   CANDLE_LAB_PYTHON: the python with torch (else python3, when torch imports).
#   CANDLE_LAB_RUN_BUDGET_S: seconds for the whole run (450; 150 with --cpu).
#   CANDLE_LAB_STEP_TIMEOUT_S: caps every step's timeout (CI: a hanging program).
#   CANDLE_LAB_STEPS: a regular expression; only the steps whose names match run
#     (a rerun of a few in what is left of the lease: CANDLE_LAB_STEPS='^(block|test-cli)$').
set -uo pipefail # no -e: every failure below is caught, reported and summarized

usage="usage: scripts/gpu-run.sh [--cpu | --rehearse] OUT_DIR [BUNDLE]"
mode=cuda rehearse=0
case ${1:-} in
  --cpu) mode=cpu && shift ;;
  --rehearse) rehearse=1 && shift ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
  -*) echo "error: unknown option $1; $usage" >&2 && exit 2 ;;
esac
(($# == 1 || $# == 2)) || { echo "$usage" >&2 && exit 2; }
out=$1
bundle=${2:-.gpu-bundle/candle-lab-$mode.tar.xz}

# --- Refusals that leave OUT_DIR as it is (not even created) ---------------------
[[ -f $bundle && -r $bundle ]] || {
  echo "error: no bundle at $bundle (build it with 'just pack-$([[ $mode == cpu ]] && echo cpu || echo gpu)')" >&2
  exit 1
}
if [[ -n ${CANDLE_LAB_STEPS:-} ]]; then
  [[ step =~ $CANDLE_LAB_STEPS ]]
  (($? != 2)) || { echo "error: CANDLE_LAB_STEPS '$CANDLE_LAB_STEPS' is not a regular expression; nothing was changed" >&2 && exit 2; }
fi
if [[ -e $out || -L $out ]]; then
  [[ -d $out ]] || { echo "error: OUT_DIR $out exists and is not a folder" >&2 && exit 2; }
  if [[ -n $(ls -A "$out" 2>/dev/null) ]]; then
    echo "error: OUT_DIR $out holds files (an earlier run's?): give a new or empty folder; nothing was changed" >&2
    exit 2
  fi
fi
if ! mkdir -p "$out" || ! out=$(cd "$out" && pwd); then
  echo "error: cannot create OUT_DIR $out" >&2
  exit 1
fi
bundle=$(cd "$(dirname "$bundle")" && pwd)/$(basename "$bundle")
# The repository root, as the README runs this: the library tests read its
# results/, schema/ and tests/fixtures/ (linked into their working folder below).
start=$PWD

# --- The log: everything to the terminal and to OUT_DIR/run.log ------------------
# tee -i outlives a Ctrl-C, so the log keeps the lines written while stopping;
# the end of the run closes the pipe and waits for tee to write its last line.
exec 3>&1 4>&2
exec > >(tee -i "$out/run.log") 2>&1
tee_pid=$!
# If tee dies anyway (SIGTERM to the whole process group), write to the log file.
trap 'exec >>"$out/run.log" 2>&1' PIPE

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
only=${CANDLE_LAB_STEPS:-} # a regular expression of the step names to run (a rerun)
reserve=15 # seconds kept for the last summary and archive
deadline=$((SECONDS + budget))

tmp=$(mktemp -d)
bin=$tmp/bundle
work=$tmp/results # archived as results/
mkdir -p "$bin" "$work/logs"
printf 'step\texit\tseconds\tnote\tcommand\n' > "$work/steps.tsv"

failed=() stopped="" interrupted="" step_pid=""

# --- The summary, written after every step and at every end ----------------------

# A summary without python3: the steps table alone.
plain_summary() {
  echo "# candle-lab run ($mode bundle): summary.py could not run, steps only"
  echo
  [[ -z $stopped ]] || { echo "**Stopped: $stopped**" && echo; }
  echo "| step | exit | seconds | note |"
  echo "| --- | ---: | ---: | --- |"
  awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$work/steps.tsv"
}

# Writes summary.md and results.tar.gz into OUT_DIR from what the work folder
# holds now. A failure here is reported, never the end of the run.
snapshot() {
  printf '%s' "$stopped" > "$work/stopped"
  ((rehearse)) && : > "$work/rehearsal"
  local py
  py=$(command -v python3 || true)
  if [[ -n $py && -f $bin/scripts/summary.py ]] &&
    "$py" "$bin/scripts/summary.py" "$work" "$SECONDS" > "$work/summary.md.tmp" 2>"$work/summary.err"; then
    mv "$work/summary.md.tmp" "$work/summary.md"
  else
    [[ ! -s $work/summary.err ]] || echo "warning: summary.py failed: $(tail -n 1 "$work/summary.err")"
    plain_summary > "$work/summary.md"
  fi
  cp "$work/summary.md" "$out/.summary.md.tmp" && mv "$out/.summary.md.tmp" "$out/summary.md"
  cp "$out/run.log" "$work/run.log" 2>/dev/null
  { tar -czf "$out/.results.tar.gz.tmp" -C "$tmp" results && mv "$out/.results.tar.gz.tmp" "$out/results.tar.gz"; } ||
    echo "warning: could not write results.tar.gz"
}

record() { # NAME EXIT SECONDS NOTE COMMAND...
  local name=$1 rc=$2 secs=$3 note=$4
  shift 4
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$note" "$*" >> "$work/steps.tsv"
}

# Every end of the run comes here: the last summary, the log closed, exit.
finish() {
  local rc=$1
  trap - EXIT
  trap '' INT TERM HUP # the summary is written whole
  if [[ -n $interrupted ]]; then
    stopped="interrupted by SIG$interrupted; the steps that finished are kept"
    case $interrupted in INT) rc=130 ;; TERM) rc=143 ;; *) rc=129 ;; esac
  fi
  if [[ $mode == cuda && -d ${CUDA_CACHE_PATH:-} ]]; then
    echo "CUDA JIT cache at the end: $(find "$CUDA_CACHE_PATH" -type f | wc -l) files, $(du -sh "$CUDA_CACHE_PATH" | cut -f1)"
  fi
  echo "host memory at the end: $(head -n 1 /proc/meminfo 2>/dev/null | tr -s ' ')"
  snapshot
  echo
  cat "$out/summary.md"
  if ((!rehearse)); then
    for c in compare compare-block; do
      [[ -f $work/logs/$c.log ]] || continue
      echo
      echo "=== $c (Candle's file against PyTorch's)"
      cat "$work/logs/$c.log"
    done
  fi
  echo "OUT_DIR: $(ls "$out" | tr '\n' ' ')($(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1))"
  if [[ -n $stopped ]]; then
    echo "stopped: $stopped"
  elif ((${#failed[@]})); then
    echo "failed: ${failed[*]}"
  elif ((rehearse)); then
    echo "every step was rehearsed and accepted its arguments"
  else
    echo "every step passed"
  fi
  # Close our end of the pipe and give tee a moment to write its last lines.
  exec 1>&3 2>&4 3>&- 4>&-
  for _ in $(seq 50); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done
  rm -rf "$tmp"
  exit "$rc"
}

# stop REASON: a check failed before the steps could run.
stop() {
  stopped=$1
  echo "error: $1"
  finish 1
}

on_signal() {
  interrupted=$1
  echo "=== SIG$1: stopping the running step and the run"
  # timeout leads its own process group: the step's program and its children.
  [[ -z $step_pid ]] || kill -TERM -- "-$step_pid" 2>/dev/null || kill -TERM "$step_pid" 2>/dev/null
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP
trap 'finish $?' EXIT

# --- The bundle ----------------------------------------------------------------
unpack() {
  local magic
  magic=$(head -c 6 "$bundle" | od -An -tx1 | tr -d ' \n')
  if [[ $magic != fd377a585a00 ]] || command -v xz >/dev/null 2>&1; then
    tar -xf "$bundle" -C "$bin" 2>&1 # tar finds the compression itself
  else
    # No xz program (tar needs it for .xz): python3's tarfile reads xz itself.
    echo "unpacking with python3 (no xz on PATH)"
    python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    if hasattr(tarfile, "tar_filter"):
        t.extractall(sys.argv[2], filter="tar")
    else:
        t.extractall(sys.argv[2])
' "$bundle" "$bin" 2>&1
  fi
}
unpacked=$(unpack) || stop "cannot unpack $bundle (damaged or truncated?): $(tr '\n' ' ' <<<"$unpacked")"
[[ -z $unpacked ]] || echo "$unpacked"
[[ -f $bin/BUNDLE && -f $bin/SHA256SUMS ]] || stop "$bundle has no BUNDLE or SHA256SUMS: not a bundle from scripts/pack.sh"
bad=$(cd "$bin" && sha256sum --quiet -c SHA256SUMS 2>&1) || stop "$bundle does not match its checksums: $(head -n 3 <<<"$bad" | tr '\n' ' ')"
echo "bundle: $bundle ($(du -h "$bundle" | cut -f1)): $(tr '\n' ' ' < "$bin/BUNDLE")"
cp "$bin/BUNDLE" "$work/BUNDLE"
kind=$(sed -n 's/^kind=//p' "$bin/BUNDLE")
[[ $kind == "$mode" ]] || stop "$bundle is a $kind bundle; this is a $mode run"
cmp -s "$0" "$bin/scripts/gpu-run.sh" ||
  echo "note: $0 differs from the bundle's scripts/gpu-run.sh: the steps are this script's"
((rehearse)) && echo "rehearsal: every step runs with its exact arguments and stops after checking them"
[[ -z $only ]] || echo "steps: only those whose names match '$only' (CANDLE_LAB_STEPS); the others are listed as not selected"

# The python that runs the PyTorch reference, by scripts/pytorch-env.sh's rule
# (CANDLE_LAB_PYTHON, else python3 where torch imports; no venv is made here).
torch_py=$("$bin/scripts/pytorch-env.sh" --no-venv 2>/dev/null) || torch_py=""
echo "python with torch: ${torch_py:-none (the PyTorch step is skipped)}"

# --- The machine: driver, CUDA libraries, architecture -----------------------------
if [[ $mode == cuda ]]; then
  driver_root=${CANDLE_LAB_DRIVER_ROOT:-/usr/local/nvidia}
  # libcuda.so.1: the linker's cache first, then the driver's own folders.
  libcuda=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }')
  if [[ -n $libcuda ]]; then
    echo "driver: $libcuda (the linker's cache)"
  else
    for d in "$driver_root/lib64" "$driver_root/lib"; do
      if [[ -e $d/libcuda.so.1 ]]; then
        libcuda=$d/libcuda.so.1
        export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        echo "driver: $libcuda (not in the linker's cache; its folder added to LD_LIBRARY_PATH)"
        break
      fi
    done
  fi
  [[ -n $libcuda ]] || stop "libcuda.so.1 (the NVIDIA driver) is in neither the linker's cache (ldconfig -p) nor $driver_root/lib64 or /lib; set CANDLE_LAB_DRIVER_ROOT"
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    [[ -x $driver_root/bin/nvidia-smi ]] || stop "nvidia-smi is neither on PATH nor in $driver_root/bin"
    export PATH="$driver_root/bin:$PATH"
  fi
  echo "nvidia-smi: $(command -v nvidia-smi)"

  find_cu13() {
    "$1" - <<'PY'
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
  cu13=${CANDLE_LAB_CUDA_LIB:-}
  [[ -n $cu13 || -z $torch_py ]] || cu13=$(find_cu13 "$torch_py") || cu13=""
  [[ -n $cu13 ]] || stop "no nvidia/cu13/lib with libcublas.so.13 found by ${torch_py:-a python with torch}; set CANDLE_LAB_CUDA_LIB"
  export LD_LIBRARY_PATH="$cu13${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "CUDA libraries: $cu13"
  for exe in "$bin"/experiments/* "$bin"/tools/* "$bin"/tests/*; do
    missing=$(ldd "$exe" 2>&1 | grep 'not found')
    [[ -z $missing ]] || stop "$(basename "$exe"): libraries not found: $(tr -s ' \t\n' ' ' <<<"$missing")"
  done
  # A bundle's kernels load only on the GPUs its architecture allows (README, On a GPU).
  want=$(sed -n 's/^compute_cap=//p' "$bin/BUNDLE")
  arch=$(sed -n 's/^arch=//p' "$bin/BUNDLE")
  have=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>&1 | head -n 1 | tr -d ' .')
  [[ $have =~ ^[0-9]+$ ]] || stop "nvidia-smi gave no compute capability ('$have')"
  if [[ $arch == *[af] && $have != "$want" ]] || ((have < want)); then
    stop "this GPU is compute capability $have; the bundle's kernels are $arch. Build one for it: just pack-gpu $have"
  fi
fi

# The host's memory as the run starts: on the lent GPU machine MemTotal starts
# small and grows on demand, so the programs there skip their host check (below).
echo "host memory at the start (/proc/meminfo):"
head -n 3 /proc/meminfo 2>/dev/null | sed 's/^/  /'

if [[ $mode == cuda ]]; then
  # Candle's kernels are PTX that the driver compiles for the GPU when a module
  # first loads, keeping the result in its JIT cache (by default ~/.nv/ComputeCache,
  # which may be unwritable or too small). One cache of the run's own, large
  # enough for every module, so the ~35 CUDA processes below compile each module
  # once; overhead's first-call rows record whether it held entries (jit_cache).
  unset CUDA_CACHE_DISABLE
  export CUDA_CACHE_PATH=$tmp/cuda-cache CUDA_CACHE_MAXSIZE=4294967296 # 4 GiB, the driver's maximum
  mkdir -p "$CUDA_CACHE_PATH"
  echo "CUDA JIT cache: $CUDA_CACHE_PATH (CUDA_CACHE_MAXSIZE=$CUDA_CACHE_MAXSIZE)"
fi

# --- The steps ------------------------------------------------------------------

# step NAME TIMEOUT_S [--informational] COMMAND...: runs COMMAND under its own
# timeout (clamped to what is left of the budget), its output to logs/NAME.log
# and the terminal, and records its exit code and seconds.
step() {
  local name=$1 limit=$2 counts=yes
  shift 2
  if [[ $1 == --informational ]]; then
    counts=no
    shift
  fi
  if [[ -n $interrupted ]]; then
    record "$name" - 0 "not run: interrupted by SIG$interrupted" "${@#"$bin/"}"
    return 0
  fi
  if [[ -n $only && ! $name =~ $only ]]; then
    record "$name" - 0 "not selected (CANDLE_LAB_STEPS; not counted)" "${@#"$bin/"}"
    return 0
  fi
  local left=$((deadline - SECONDS - reserve))
  ((t_cap > 0 && limit > t_cap)) && limit=$t_cap
  ((limit > left)) && limit=$left
  if ((left < 5)); then
    echo "=== $name: skipped, the run's ${budget} s budget is spent"
    record "$name" - 0 "skipped: budget spent" "${@#"$bin/"}"
    [[ $counts == yes ]] && failed+=("$name (not run)")
    return 0
  fi
  echo "=== $name (timeout ${limit} s): ${*#"$bin/"}"
  local log=$work/logs/$name.log t0=$EPOCHREALTIME rc
  : > "$log"
  PYTHONUNBUFFERED=1 timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1 < /dev/null &
  step_pid=$!
  tail --pid="$step_pid" -s 0.2 -n +1 -f "$log" &
  local tail_pid=$!
  # A trapped signal ends `wait` early; the trap has asked the step to stop,
  # so wait again, and after 10 s make sure.
  local waited=0
  while :; do
    wait "$step_pid"
    rc=$?
    kill -0 "$step_pid" 2>/dev/null || break
    if [[ -n $interrupted ]]; then
      sleep 0.2
      waited=$((waited + 1))
      ((waited < 50)) || kill -KILL -- "-$step_pid" 2>/dev/null
    fi
  done
  step_pid=""
  wait "$tail_pid" 2>/dev/null
  local secs
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  local note=""
  case $rc in
    0) ((rehearse)) && note="rehearsed: arguments accepted" ;;
    3) note="some rows failed (see their errors)" ;;
    124 | 137) note="timed out after ${limit} s" ;;
    *) note="failed" ;;
  esac
  [[ -z $interrupted ]] || note="interrupted by SIG$interrupted"
  [[ $counts == no && $rc != 0 ]] && note="$note (informational: not counted)"
  echo "=== $name: exit $rc, ${secs} s${note:+, $note}"
  record "$name" "$rc" "$secs" "$note" "${@#"$bin/"}"
  if [[ $rc != 0 && $counts == yes ]]; then
    failed+=("$name (exit $rc)")
  fi
  snapshot
}

# In a rehearsal a program stops after checking its arguments, and a test
# harness lists its tests instead of running them.
dry=()
((rehearse)) && dry=(--dry-run)

# help_of PROGRAM...: what PROGRAM --help prints (nothing when it has no --help).
help_of() { timeout 10 "$@" --help 2>/dev/null; }
# has FLAG: whether $help lists FLAG. Whole flag names only: `--size` is not `--sizes`.
has() { [[ $help =~ (^|[[:space:]])$1([[:space:]]|=|,|$) ]]; }
# skip_host PROGRAM...: sets host=(--skip-host-memory-check) in CUDA mode when
# PROGRAM accepts it, else host=(). The GPU machine's memory grows on demand:
# MemTotal at the start understates what a run can have, so a host check there
# would refuse sizes that fit (block, memory and sweep by their defaults).
skip_host() {
  host=()
  [[ $mode == cuda ]] || return 0
  local help
  help=$(help_of "$@")
  if has --skip-host-memory-check; then host=(--skip-host-memory-check); fi
}

# The plan. Each program's argument list is the GPU call's, exactly. Step 1 takes
# each experiment's own preset (`--preset gpu-call`, or under --cpu `--preset
# small`: seconds on two cores), so a new experiment needs nothing here.
if [[ $mode == cuda ]]; then
  step nvidia-smi 30 nvidia-smi
  nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv > "$work/gpu.csv" 2>&1
  cp "$work/logs/nvidia-smi.log" "$work/nvidia-smi.txt"
fi

# 1. Every experiment with its preset.
preset=gpu-call
[[ $mode == cpu ]] && preset=small
block_weights=$tmp/block-weights.safetensors
for exe in "$bin"/experiments/*; do
  name=$(basename "$exe")
  skip_host "$exe"
  args=(--device "$device" --preset "$preset" --output "$work/$name.json" "${host[@]}")
  # The weights PyTorch's twin loads (not archived: a GPU block's are 0.8 GB).
  [[ $name == block ]] && args+=(--save-weights "$block_weights")
  step "$name" "$t_program" "$exe" "${args[@]}" "${dry[@]}"
done

# 2. The extra runs: matmul in every precision at 8192, cpu_vs_gpu at 8192, each
# with the host check skipped where it has the flag (skip_host). PyTorch has its
# own list: it has no bf16-reduced (no switch for that cuBLAS mode).
if [[ $mode == cuda ]]; then
  size=8192
  matmul_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --no-cpu)
  pytorch_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16 --no-cpu)
  cpu_vs_gpu_args=(--size "$size" --iters 20 --warmup 5)
else
  size=192
  matmul_args=(--size "$size" --iters 3 --warmup 1 --dtypes fp64,fp32,fp16,bf16)
  pytorch_args=("${matmul_args[@]}")
  cpu_vs_gpu_args=(--size "$size" --iters 4 --warmup 1)
fi
matmul_json=$work/matmul-$size.json
pytorch_json=$work/pytorch-matmul-$size.json
if [[ -x $bin/experiments/matmul ]]; then
  skip_host "$bin/experiments/matmul"
  step "matmul-$size" "$t_program" "$bin/experiments/matmul" --device "$device" "${matmul_args[@]}" \
    "${host[@]}" --output "$matmul_json" "${dry[@]}"
fi
if [[ -x $bin/experiments/cpu_vs_gpu ]]; then
  skip_host "$bin/experiments/cpu_vs_gpu"
  step "cpu_vs_gpu-$size" "$t_program" "$bin/experiments/cpu_vs_gpu" --device "$device" \
    "${cpu_vs_gpu_args[@]}" "${host[@]}" --output "$work/cpu_vs_gpu-$size.json" "${dry[@]}"
fi

# 3. The PyTorch reference at the same settings, with the python that has torch,
# then at once Candle against PyTorch on them (a rehearsal writes no files:
# compare then checks its arguments only), before anything the budget may cut.
if [[ -f $bin/pytorch/matmul/__main__.py ]]; then
  if [[ -n $torch_py ]]; then
    skip_host "$torch_py" "$bin/pytorch/matmul"
    step "pytorch-matmul-$size" "$t_python" "$torch_py" "$bin/pytorch/matmul" --device "$device" \
      "${pytorch_args[@]}" "${host[@]}" --output "$pytorch_json" "${dry[@]}"
  else
    echo "=== pytorch-matmul-$size: skipped, no python with torch"
    record "pytorch-matmul-$size" - 0 "skipped: no python with torch (not counted)" python3 pytorch/matmul
  fi
fi
if [[ -x $bin/tools/compare && -n $torch_py ]] && { ((rehearse)) || [[ -f $pytorch_json && -f $matmul_json ]]; }; then
  step compare 60 --informational "$bin/tools/compare" "$matmul_json" "$pytorch_json" "${dry[@]}"
fi

# The PyTorch twin of the block, on the weights Candle's block wrote, then the two compared.
if [[ -f $bin/pytorch/block/__main__.py && -x $bin/experiments/block ]]; then
  if [[ -n $torch_py ]]; then
    block_args=(--dtypes fp32,fp16,bf16 --iters 3 --warmup 1)
    [[ $mode == cpu ]] || block_args=(--dtypes fp32,tf32,fp16,bf16)
    skip_host "$torch_py" "$bin/pytorch/block"
    step pytorch-block "$t_python" "$torch_py" "$bin/pytorch/block" --device "$device" \
      --weights "$block_weights" "${block_args[@]}" "${host[@]}" --output "$work/pytorch-block.json" "${dry[@]}"
  else
    record pytorch-block - 0 "skipped: no python with torch (not counted)" python3 pytorch/block
  fi
fi
if [[ -x $bin/tools/compare && -n $torch_py ]] && { ((rehearse)) || [[ -f $work/pytorch-block.json && -f $work/block.json ]]; }; then
  step compare-block 60 --informational "$bin/tools/compare" "$work/block.json" "$work/pytorch-block.json" "${dry[@]}"
fi

# The PyTorch twin of the kernels (its ops on the same cases and precisions), then the two compared.
if [[ -f $bin/pytorch/kernels/__main__.py && -x $bin/experiments/kernels ]]; then
  if [[ -n $torch_py ]]; then
    kernels_args=()
    [[ $mode == cpu ]] && kernels_args=(--cases block-prefill,block-decode,smollm2-decode --seq 16 --iters 3 --warmup 1)
    skip_host "$torch_py" "$bin/pytorch/kernels"
    step pytorch-kernels "$t_python" "$torch_py" "$bin/pytorch/kernels" --device "$device" \
      "${kernels_args[@]}" "${host[@]}" --output "$work/pytorch-kernels.json" "${dry[@]}"
  else
    record pytorch-kernels - 0 "skipped: no python with torch (not counted)" python3 pytorch/kernels
  fi
fi
if [[ -x $bin/tools/compare && -n $torch_py ]] && { ((rehearse)) || [[ -f $work/pytorch-kernels.json && -f $work/kernels.json ]]; }; then
  step compare-kernels 60 --informational "$bin/tools/compare" "$work/kernels.json" "$work/pytorch-kernels.json" "${dry[@]}"
fi

# 4. The packed test harnesses, one test at a time (they share one GPU); the CLI
# tests find the programs through CANDLE_LAB_BIN_DIR.
export CANDLE_LAB_BIN_DIR="$bin/experiments" CANDLE_LAB_TOOLS_DIR="$bin/tools"
scratch=$tmp/scratch # the tests' working folder, not archived
mkdir -p "$scratch/tests"
for d in results schema tests/fixtures; do
  if [[ -d $start/$d && ! -e $scratch/$d ]]; then ln -s "$start/$d" "$scratch/$d"; fi
done
cd "$scratch" || stop "cannot enter $scratch"
harness=(--test-threads 1)
((rehearse)) && harness=(--list)
for t in "$bin"/tests/*; do
  step "test-$(basename "$t")" "$t_test" "$t" "${harness[@]}"
done

if ((${#failed[@]})); then
  finish 1
fi
finish 0
