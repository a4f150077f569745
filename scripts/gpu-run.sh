#!/usr/bin/env bash
# shellcheck disable=SC2054,SC2317,SC2012 # flag values hold commas; traps call functions
# Runs the suite from a bundle that `just pack-gpu` built (release programs and
# test harnesses, no cargo needed), on a machine with an NVIDIA GPU, its driver
# and a python3 with PyTorch's CUDA 13 wheels (nvidia/*/lib), in calls that fit a
# short lease on a lent GPU (docs/gpu.md, "The plan"):
#
#   - The plan (the table below, PLAN) fits by construction: every step has its
#     own limit, and the limits of a call's steps, with the setup's allowance and
#     the reserve for the last summary, must add up to no more than the call's
#     budget, or the script refuses to start (exit 2). The first call (the
#     default) runs the steps worth most, each PyTorch twin and its compare right
#     after the Candle step they pair with; the second call (CANDLE_LAB_STEPS,
#     printed with the plan) holds what does not fit, the test harnesses first
#     and the sweep, which keeps partial results, last. The plan is printed
#     before step 1; `--plan` prints both calls' and checks them.
#   - Everything is checked before anything is written: the bundle (unpacked
#     with xz, or with python3 where xz is missing, then every file against its
#     checksum), the driver (libcuda.so.1 from the linker's cache or the driver's
#     folder, nvidia-smi on PATH or in that folder; NVML's libnvidia-ml.so.1), the
#     libraries every program asks for (ldd, searched in every nvidia/*/lib folder
#     of the python with torch: a library found nowhere is a gap in the log, and
#     only the steps whose program needs it are skipped), the GPU's architecture.
#     OUT_DIR must be new or empty: an earlier run is never touched.
#   - OUT_DIR ends with three files: summary.md (the table to read first),
#     results.tar.gz (every JSON, log and nvidia-smi's output) and run.log. The
#     lent machine returns at most 8 files; both are rewritten after every step,
#     and a run that stops (a failed check, Ctrl-C, SIGTERM) still ends with its
#     summary, saying why it stopped.
#   - A step runs under its limit: a hang loses that step only. A step is never
#     started with under 30 s of the budget left (or under its own limit, when
#     that is smaller): it is listed as skipped, with the reason. SIGINT or SIGTERM
#     stops the running step (its whole process group), runs no other, and exits
#     130 or 143 after the summary.
#   - A rerun is cheap: the unpacked bundle and the driver's JIT cache
#     (CUDA_CACHE_PATH) live in fixed folders (CANDLE_LAB_RUN_CACHE) that a later
#     call on the same machine finds and reuses, and the log says so. On the GPU
#     every program whose --help lists --skip-host-memory-check gets it (that
#     machine's memory grows on demand). A failed step does not stop the others;
#     the exit code is 1 when any step failed.
#
# Usage: scripts/gpu-run.sh OUT_DIR [BUNDLE]              on the GPU machine: the first call
#        scripts/gpu-run.sh --cpu OUT_DIR [BUNDLE]        every step on the CPU, small sizes
#                                                         (`just pack-cpu`; CI runs it)
#        scripts/gpu-run.sh --rehearse OUT_DIR [BUNDLE]   the GPU call's every step with its
#                                                         exact arguments, each stopped after
#                                                         checking them (--dry-run; a test
#                                                         harness lists its tests), and the
#                                                         host side of each timed on this CPU:
#                                                         CI runs it with stand-ins for the driver
#        scripts/gpu-run.sh --plan                        both GPU calls' plan, checked (exit 2
#                                                         when a call's limits exceed its budget)
#   BUNDLE defaults to .gpu-bundle/candle-lab-cuda.tar.xz (-cpu with --cpu).
#   CANDLE_LAB_CUDA_LIB=/path/to/lib is searched first for the CUDA libraries.
#   CANDLE_LAB_DRIVER_ROOT: the driver's folder (default /usr/local/nvidia).
#   CANDLE_LAB_PYTHON: the python with torch (else python3, when torch imports).
#   CANDLE_LAB_RUN_BUDGET_S: seconds for the whole run (default: what the plan of
#     the steps run needs; a GPU call at most 560 s).
#   CANDLE_LAB_STEP_TIMEOUT_S: caps every step's limit (CI: a hanging program).
#   CANDLE_LAB_STEPS: a regular expression; only the steps whose names match run,
#     whatever their call (the second call, or a rerun of a few:
#     CANDLE_LAB_STEPS='^(block|test-cli)$').
#   CANDLE_LAB_RUN_CACHE: the folder kept for a rerun (default
#     .gpu-run-cache in the repository, git-ignored): the unpacked bundle, the JIT cache.
set -uo pipefail # no -e: every failure below is caught, reported and summarized

usage="usage: scripts/gpu-run.sh [--cpu | --rehearse] OUT_DIR [BUNDLE] | --plan"
mode=cuda rehearse=0 plan_only=0
case ${1:-} in
  --cpu) mode=cpu && shift ;;
  --rehearse) rehearse=1 && shift ;;
  --plan) plan_only=1 && shift ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
  -*) echo "error: unknown option $1; $usage" >&2 && exit 2 ;;
esac

# --- The plan -------------------------------------------------------------------
# One line a step, in the order the steps run: its name (SIZE: 8192 on the GPU,
# 192 on the CPU), its call on the GPU, its limit there (s), what it took there
# (s: the lent H200's first run, 2026-12-04, docs/gpu.md; test-candle_lab's
# and test-sweep's from runs that failed; memory's is an expectation until a
# GPU finishes it), its limit on the CPU (-: not run
# there), and what it is. A program step's limit is at least 15 s (a CUDA
# process starts, loads cuBLAS and the kernels' PTX). Order by value: each
# comparison with PyTorch whole in the first call, then generate; the test
# harnesses lead the second call, and the sweep, which keeps its finished
# points, ends it.
PLAN=$(cat <<'END_OF_PLAN'
nvidia-smi              1  10  1      -   the GPU, its driver and clocks (nvidia-smi.txt)
matmul                  1  15  7      30  4096 in every precision, and the reference lab's fp32 on the CPU
matmul-SIZE             1  25  14     30  SIZE in seven precisions (each timed in turn with fp32 too), no CPU
pytorch-matmul-SIZE     1  25  12     45  PyTorch at the same settings (no bf16-reduced)
compare                 1   5  1      20  Candle against PyTorch at SIZE (informational)
block                   1  70  38     30  the Llama-like layer, four precisions, each on both kernel sets
pytorch-block           1  30  11     45  PyTorch on the weights the block wrote
compare-block           1   5  1      20  the two blocks compared (informational)
kernels                 1  50  34     30  six ops x four cases x three precisions
pytorch-kernels         1  20  7      45  PyTorch on the same cases
compare-kernels         1  10  1      20  the two compared (informational)
generate                1  90  52     45  random weights at Llama-3.2-1B's shape, four rows beside fp32's copy, each saved
memory                  1 145  40-140 30  transfers to 1 GiB, the ladder, operations on 1 GiB tensors, the roofline's matmuls
overhead                1  15  1      30  launch overhead and first calls (the JIT cache warm)
test-candle_lab         2  30  11     120 the library's tests, its CUDA ones among them
test-cli                2  60  7      90  the programs as a user runs them
test-generate           2  30  8      60  generate end to end, on the CPU and CUDA
scaling                 2  75  25-50  45  Llama-3.2-1B's shape at bf16 on the suite's kernels: depths, prompts, batches to 64
test-kernels            2  20  4      60  the suite's kernels against Candle's, on CUDA too
test-matvec             2  20  2      60  the matrix-vector and quantized kernels, on CUDA too
test-block              2  20  5      45  the block on CUDA
test-sweep              2  40  4      60  the sweep's files, an interrupted sweep
test-memory_overhead    2  15  3      45  memory's and overhead's fields on CUDA
test-summary            2  15  5      45  a fresh run's summary, on CUDA
test-cuda_pool          2  15  1      30  the CUDA pool's peak
test-alloc_peak         2  15  1      30  the counting allocator
cpu_vs_gpu              2  20  2      30  fp32 at 4096 on both sides
cpu_vs_gpu-SIZE         2  30  9      30  fp32 at SIZE: the CPU's side dominates
basics                  2  15  1      30  what a tensor is, on the GPU
precision               2  15  1      30  what each format keeps
sweep                   2  60  19     60  11 sizes to 16384 x 3 precisions, 1 s a point at most
END_OF_PLAN
)
setup_fresh=30 setup_reused=10 # the setup's allowance: unpack, checks, libraries
reserve=15                     # kept for the last summary and archive
call_max=560                   # a GPU call's budget at most: its timeout_s is 590 of the tool's 600
start_need=30                  # no step starts with less of the budget left (or its limit)
generate_host=40               # generate's host side its limit assumes (measured: docs/gpu.md)

size=8192
[[ $mode == cpu ]] && size=192
declare -a P_NAME=() P_CALL=() P_LIMIT=() P_EXPECT=() P_CPU=() P_WHAT=()
while read -r name call limit expect cpu what; do
  [[ -n $name ]] || continue
  P_NAME+=("${name//SIZE/$size}") P_CALL+=("$call") P_LIMIT+=("$limit")
  P_EXPECT+=("$expect") P_CPU+=("$cpu") P_WHAT+=("${what//SIZE/$size}")
done <<<"$PLAN"

only=${CANDLE_LAB_STEPS:-} # a regular expression of the step names to run
if [[ -n $only ]]; then
  [[ step =~ $only ]]
  (($? != 2)) || { echo "error: CANDLE_LAB_STEPS '$only' is not a regular expression; nothing was changed" >&2 && exit 2; }
fi
t_cap=${CANDLE_LAB_STEP_TIMEOUT_S:-0}
[[ $t_cap =~ ^[0-9]+$ ]] || { echo "error: CANDLE_LAB_STEP_TIMEOUT_S '$t_cap' is not a number of seconds" >&2 && exit 2; }

# limit_of I: step I's limit in this mode (capped by CANDLE_LAB_STEP_TIMEOUT_S);
# "-" where the step does not run in this mode.
limit_of() {
  local l=${P_LIMIT[$1]}
  [[ $mode == cpu ]] && l=${P_CPU[$1]}
  [[ $l == - ]] && { echo - && return; }
  ((t_cap > 0 && l > t_cap)) && l=$t_cap
  echo "$l"
}

# why_not I: empty when step I runs in this call, else why not (its note).
why_not() {
  local i=$1
  [[ $(limit_of "$i") != - ]] || { echo "not run on the CPU" && return; }
  if [[ -n $only ]]; then
    [[ ${P_NAME[$i]} =~ $only ]] || echo "not selected (CANDLE_LAB_STEPS; not counted)"
  elif [[ $mode == cuda && ${P_CALL[$i]} != 1 ]]; then
    echo "in the second call (not counted; its CANDLE_LAB_STEPS is in the log's plan)"
  fi
}

# call_regex N: the CANDLE_LAB_STEPS that selects call N's steps, quoted.
call_regex() {
  local i names=()
  for i in "${!P_NAME[@]}"; do [[ ${P_CALL[$i]} != "$1" ]] || names+=("${P_NAME[$i]}"); done
  local IFS='|'
  echo "'^(${names[*]})\$'"
}

# expect_sum LO HI EXPECT: LO and HI plus EXPECT's range ("5-10" or "1").
expect_sum() { local lo=${3%-*} hi=${3#*-}; echo "$(($1 + lo)) $(($2 + hi))"; }

# plan_need SETUP: the seconds the steps this run runs need: SETUP, their
# limits, the reserve.
plan_need() {
  local i sum=$1
  for i in "${!P_NAME[@]}"; do
    [[ -n $(why_not "$i") ]] || sum=$((sum + $(limit_of "$i")))
  done
  echo $((sum + reserve))
}

# The plan printed before step 1: the steps this run runs, each with its limit,
# what it is expected to take and the latest second it can start at; then the
# sum against the budget.
print_plan() {
  local setup=$1 i cum=$1 lo=0 hi=0 n=0 l e
  echo "plan: the steps this run runs, each under its own limit, in this order:"
  echo "| step | limit s | expected s | starts by s |"
  echo "| --- | ---: | ---: | ---: |"
  for i in "${!P_NAME[@]}"; do
    [[ -z $(why_not "$i") ]] || continue
    l=$(limit_of "$i") e=${P_EXPECT[$i]}
    [[ $mode == cuda ]] || e=-
    echo "| ${P_NAME[$i]} | $l | $e | $cum |"
    cum=$((cum + l)) n=$((n + 1))
    read -r lo hi <<<"$(expect_sum "$lo" "$hi" "${P_EXPECT[$i]}")"
  done
  local expected="; the steps are expected to take $lo-$hi s on an H200"
  [[ $mode == cuda ]] || expected=" (expected times: the GPU's only)"
  echo "plan: $n steps: setup $setup s + limits $((cum - setup)) s + reserve $reserve s = $((cum + reserve)) s$expected"
  if [[ $mode == cuda && -z $only ]]; then
    echo "plan: the second call runs the others: CANDLE_LAB_STEPS=$(call_regex 2)"
  fi
}

# is_program I: whether step I starts a program of the suite (not nvidia-smi or
# a compare, which read files): such a step's limit is at least 15 s.
is_program() { [[ ${P_NAME[$1]} != nvidia-smi && ${P_NAME[$1]} != compare* ]]; }

# The whole GPU plan, both calls, as docs/gpu.md shows it (a test checks that
# the two agree), each call's sum checked: exit 2 when the first call's does not
# fit its budget, or a program step's limit is under 15 s.
full_plan() {
  local call i bad=0 setup need sum lo hi what range
  echo "| call | step | limit s | expected s | what |"
  echo "| ---: | --- | ---: | ---: | --- |"
  for call in 1 2; do
    if ((call == 1)); then
      setup=$setup_fresh range=10-25 what="the bundle unpacked into the rerun cache"
    else
      setup=$setup_reused range=1-5 what="the first call's unpacked bundle and JIT cache reused"
    fi
    echo "| $call | setup: unpack or reuse, checksums, driver, libraries | $setup | $range | $what |"
    sum=0
    read -r lo hi <<<"$(expect_sum 0 0 "$range")"
    for i in "${!P_NAME[@]}"; do
      [[ ${P_CALL[$i]} == "$call" ]] || continue
      echo "| $call | ${P_NAME[$i]} | ${P_LIMIT[$i]} | ${P_EXPECT[$i]} | ${P_WHAT[$i]} |"
      sum=$((sum + P_LIMIT[i]))
      read -r lo hi <<<"$(expect_sum "$lo" "$hi" "${P_EXPECT[$i]}")"
      if is_program "$i" && ((P_LIMIT[i] < 15)); then
        echo "error: ${P_NAME[$i]}'s limit of ${P_LIMIT[$i]} s is under the 15 s a program step is given" >&2
        bad=1
      fi
    done
    read -r lo hi <<<"$(expect_sum "$lo" "$hi" 1-2)"
    need=$((setup + sum + reserve))
    # timeout_s: the transfer's 30 s, and a fresh setup's where a call counted
    # on a warm machine's and found it gone cold.
    echo "| $call | reserve: the last summary and archive | $reserve | 1-2 | |"
    echo "| $call | **the call's budget** | **$need** | **$lo-$hi** | CANDLE_LAB_RUN_BUDGET_S=$need; the device tool's timeout_s=$((need + 30 + setup_fresh - setup)) |"
    if ((call == 1 && need > call_max)); then
      echo "error: the first call's plan needs $need s (setup $setup, limits $sum, reserve $reserve), more than its budget of $call_max s: move a step to the second call or lower a limit" >&2
      bad=1
    fi
  done
  sum=0
  for i in "${!P_NAME[@]}"; do [[ ${P_NAME[$i]} != test-* ]] || sum=$((sum + P_LIMIT[i])); done
  echo
  echo "The second call: CANDLE_LAB_STEPS=$(call_regex 2)"
  echo "Its test harnesses alone: CANDLE_LAB_STEPS='^test-' CANDLE_LAB_RUN_BUDGET_S=$((setup_reused + sum + reserve))"
  return "$bad"
}

if ((plan_only)); then
  full_plan || exit 2
  exit 0
fi

(($# == 1 || $# == 2)) || { echo "$usage" >&2 && exit 2; }
out=$1
bundle=${2:-.gpu-bundle/candle-lab-$mode.tar.xz}

# --- Refusals that leave OUT_DIR as it is (not even created) ---------------------
[[ -f $bundle && -r $bundle ]] || {
  echo "error: no bundle at $bundle (build it with 'just pack-$([[ $mode == cpu ]] && echo cpu || echo gpu)')" >&2
  exit 1
}
if [[ -e $out || -L $out ]]; then
  [[ -d $out ]] || { echo "error: OUT_DIR $out exists and is not a folder" >&2 && exit 2; }
  if [[ -n $(ls -A "$out" 2>/dev/null) ]]; then
    echo "error: OUT_DIR $out holds files (an earlier run's?): give a new or empty folder; nothing was changed" >&2
    exit 2
  fi
fi
# The rerun cache: the bundle unpacked once, by its checksum.
# In the repository's copy by default: the device keeps its ignored paths
# between calls, and nothing says its /tmp may run programs.
cache=${CANDLE_LAB_RUN_CACHE:-$(cd "$(dirname "$0")/.." && pwd)/.gpu-run-cache}
bundle_id=$(sha256sum "$bundle" | cut -c1-16)
bin=$cache/bundle-$mode-$bundle_id
setup=$setup_fresh
[[ ! -f $bin/.checked ]] || setup=$setup_reused
# The plan must fit the budget before anything is written.
plan_text=$(print_plan "$setup")
need=$(plan_need "$setup")
if ((need == setup + reserve)); then
  echo "error: CANDLE_LAB_STEPS '$only' selects none of the plan's steps (scripts/gpu-run.sh --plan lists them); nothing was changed" >&2
  exit 2
fi
default_budget=$need
[[ $mode == cuda ]] && ((default_budget > call_max)) && default_budget=$call_max
budget=${CANDLE_LAB_RUN_BUDGET_S:-$default_budget}
[[ $budget =~ ^[0-9]+$ ]] || { echo "error: CANDLE_LAB_RUN_BUDGET_S '$budget' is not a number of seconds" >&2 && exit 2; }
if ((need > budget)); then
  echo "$plan_text" >&2
  echo "error: the plan needs $need s, more than the budget of $budget s: select fewer steps (CANDLE_LAB_STEPS) or give a larger CANDLE_LAB_RUN_BUDGET_S; nothing was run" >&2
  exit 2
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

device=cuda
[[ $mode == cpu ]] && device=cpu
deadline=$((SECONDS + budget))

tmp=$(mktemp -d)
work=$tmp/results # archived as results/
mkdir -p "$work/logs"
printf 'step\texit\tseconds\tnote\tcommand\n' > "$work/steps.tsv"

failed=() stopped="" interrupted="" step_pid="" step_rc=-
declare -A gap=() # program (bundle-relative) -> the libraries it needs that were not found

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
    echo "CUDA JIT cache at the end: $(find "$CUDA_CACHE_PATH" -type f | wc -l) files, $(du -sh "$CUDA_CACHE_PATH" | cut -f1) (kept for a rerun)"
  fi
  echo "host memory at the end: $(head -n 1 /proc/meminfo 2>/dev/null | tr -s ' ')"
  snapshot
  echo
  cat "$out/summary.md"
  if ((!rehearse)); then
    for c in compare compare-block compare-kernels; do
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

# --- The bundle: unpacked once into the rerun cache ---------------------------------
unpack() { # DIR
  local magic
  magic=$(head -c 6 "$bundle" | od -An -tx1 | tr -d ' \n')
  if [[ $magic != fd377a585a00 ]] || command -v xz >/dev/null 2>&1; then
    tar -xf "$bundle" -C "$1" 2>&1 # tar finds the compression itself
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
' "$bundle" "$1" 2>&1
  fi
}
setup_t0=$SECONDS
mkdir -p "$cache" 2>/dev/null || stop "cannot create the rerun cache $cache (CANDLE_LAB_RUN_CACHE)"
# One run at a time uses a cache: a second would remove or replace what it runs.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.lock"
  if ! flock -n 9; then
    stop "another gpu-run.sh is using the rerun cache $cache: wait for it to end, or set CANDLE_LAB_RUN_CACHE"
  fi
fi
if [[ -f $bin/.checked ]]; then
  echo "bundle: reusing $bin, unpacked and checked by an earlier run ($(cat "$bin/.checked")): not unpacked again"
else
  # A run stopped while unpacking leaves its partial folder: with the lock held,
  # no other run is writing one.
  rm -rf "$cache"/.partial-*
  partial=$cache/.partial-$mode-$bundle_id-$$
  mkdir -p "$partial" || stop "cannot write into the rerun cache $cache (CANDLE_LAB_RUN_CACHE)"
  unpacked=$(unpack "$partial") || { rm -rf "$partial"; stop "cannot unpack $bundle (damaged or truncated?): $(tr '\n' ' ' <<<"$unpacked")"; }
  [[ -z $unpacked ]] || echo "$unpacked"
  [[ -f $partial/BUNDLE && -f $partial/SHA256SUMS ]] || { rm -rf "$partial"; stop "$bundle has no BUNDLE or SHA256SUMS: not a bundle from scripts/pack.sh"; }
  bad=$(cd "$partial" && sha256sum --quiet -c SHA256SUMS 2>&1) || { rm -rf "$partial"; stop "$bundle does not match its checksums: $(head -n 3 <<<"$bad" | tr '\n' ' ')"; }
  for old in "$cache"/bundle-"$mode"-*; do
    [[ -d $old && $old != "$bin" ]] || continue
    rm -rf "$old" && echo "rerun cache: removed an older $mode bundle, $old"
  done
  rm -rf "$bin"
  mv "$partial" "$bin" || stop "cannot move the unpacked bundle to $bin"
  echo "$(date -u +%FT%TZ), sha256 $bundle_id" > "$bin/.checked"
  echo "bundle: unpacked and checked into $bin, kept there for a rerun"
fi
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
echo "python with torch: ${torch_py:-none (the PyTorch steps are skipped)}"

# --- The machine: driver, NVML, libraries, architecture ------------------------------
driver_root=${CANDLE_LAB_DRIVER_ROOT:-/usr/local/nvidia}
# add_lib_dir DIR: DIR first on LD_LIBRARY_PATH, once.
add_lib_dir() {
  case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) return 0 ;; esac
  export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
# driver_lib NAME: sets found to NAME's path from the linker's cache, else from
# the driver's folders (that folder then added to LD_LIBRARY_PATH), else to
# nothing. (Not in a command substitution: the PATH it exports must stay.)
driver_lib() {
  local d
  found=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }')
  if [[ -n $found ]]; then found="$found (the linker's cache)" && return; fi
  for d in "$driver_root/lib64" "$driver_root/lib"; do
    if [[ -e $d/$1 ]]; then
      add_lib_dir "$d"
      found="$d/$1 (not in the linker's cache; its folder added to LD_LIBRARY_PATH)"
      return
    fi
  done
}
if [[ $mode == cuda ]]; then
  driver_lib libcuda.so.1
  [[ -n $found ]] || stop "libcuda.so.1 (the NVIDIA driver) is in neither the linker's cache (ldconfig -p) nor $driver_root/lib64 or /lib; set CANDLE_LAB_DRIVER_ROOT"
  echo "driver: $found"
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    [[ -x $driver_root/bin/nvidia-smi ]] || stop "nvidia-smi is neither on PATH nor in $driver_root/bin"
    export PATH="$driver_root/bin:$PATH"
  fi
  echo "nvidia-smi: $(command -v nvidia-smi)"
  # NVML, by the name the driver ships it under (nvml-wrapper and pynvml open
  # libnvidia-ml.so.1): without it the runs record no clocks, power or throttling.
  driver_lib libnvidia-ml.so.1
  if [[ -n $found ]]; then
    echo "NVML: $found"
  else
    echo "library gap: NVML's libnvidia-ml.so.1 is in neither the linker's cache nor $driver_root/lib64 or /lib: the steps run, but record no GPU clocks, power or throttle reasons"
  fi
fi

# nvidia_lib_dirs PYTHON: every nvidia/*/lib folder of PYTHON's NVIDIA wheels
# (nvidia/cu13/lib, nvidia/cudnn/lib, ...), cu13's first.
nvidia_lib_dirs() {
  "$1" - <<'PY'
import glob, os, site
roots = []
try:
    import nvidia  # the namespace package of NVIDIA's wheels
    roots += list(nvidia.__path__)
except ImportError:
    pass
roots += [os.path.join(p, "nvidia") for p in site.getsitepackages() + [site.getusersitepackages()]]
found = []
for root in roots:
    for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
        lib = os.path.realpath(lib)
        if os.path.isdir(lib) and lib not in found:
            found.append(lib)
found.sort(key=lambda p: os.path.basename(os.path.dirname(p)) != "cu13")
print("\n".join(found))
PY
}
# missing_of EXE: the libraries ldd finds nowhere for EXE, one a line.
missing_of() { ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 == "not" { print $1 }'; }
search=()
[[ -z ${CANDLE_LAB_CUDA_LIB:-} ]] || search+=("$CANDLE_LAB_CUDA_LIB")
if [[ -n $torch_py ]]; then
  while IFS= read -r d; do [[ -z $d ]] || search+=("$d"); done < <(nvidia_lib_dirs "$torch_py" 2>/dev/null)
fi
programs=("$bin"/experiments/* "$bin"/tools/* "$bin"/tests/*)
declare -A wanted=() # library -> programs that ask for it
for exe in "${programs[@]}"; do
  [[ -f $exe ]] || continue
  while IFS= read -r lib; do [[ -z $lib ]] || wanted[$lib]+=" ${exe#"$bin/"}"; done < <(missing_of "$exe")
done
for lib in "${!wanted[@]}"; do
  for d in "${search[@]}"; do
    if [[ -e $d/$lib ]]; then
      add_lib_dir "$d"
      echo "library: $lib from $d"
      break
    fi
  done
done
for exe in "${programs[@]}"; do
  [[ -f $exe ]] || continue
  libs=$(missing_of "$exe" | tr '\n' ' ')
  [[ -z $libs ]] || gap[${exe#"$bin/"}]=${libs% }
done
for lib in "${!wanted[@]}"; do
  users=()
  for exe in "${!gap[@]}"; do [[ " ${gap[$exe]} " != *" $lib "* ]] || users+=("$exe"); done
  ((${#users[@]})) || continue
  echo "library gap: $lib, asked for by ${users[*]}, is in none of: ${search[*]:-no folder (no python with torch, no CANDLE_LAB_CUDA_LIB)}: only their steps are skipped"
done
if [[ $mode == cuda ]]; then
  # A bundle's kernels load only on the GPUs its architecture allows (README, On a GPU).
  want=$(sed -n 's/^compute_cap=//p' "$bin/BUNDLE")
  arch=$(sed -n 's/^arch=//p' "$bin/BUNDLE")
  # (Under a timeout: a GPU that does not answer must not hang the call.)
  have=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>&1 | head -n 1 | tr -d ' .')
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
  # which may be unwritable or too small). One cache in the rerun folder, large
  # enough for every module: the CUDA processes of this run compile each module
  # once, and a later call on the same machine none; overhead's first-call rows
  # record whether it held entries (jit_cache).
  unset CUDA_CACHE_DISABLE
  export CUDA_CACHE_PATH=$cache/cuda-cache CUDA_CACHE_MAXSIZE=4294967296 # 4 GiB, the driver's maximum
  mkdir -p "$CUDA_CACHE_PATH"
  jit=$(find "$CUDA_CACHE_PATH" -type f | wc -l)
  if ((jit)); then
    jit="$jit files, $(du -sh "$CUDA_CACHE_PATH" | cut -f1), from an earlier run: reused"
  else
    jit="empty: this run compiles each PTX module once, a later run on this machine none"
  fi
  echo "CUDA JIT cache: $CUDA_CACHE_PATH (CUDA_CACHE_MAXSIZE=$CUDA_CACHE_MAXSIZE): $jit"
fi
echo "setup: $((SECONDS - setup_t0)) s (unpack or reuse, checks, libraries) of its $setup s allowance"
echo "$plan_text"
echo "plan: the budget is $budget s (CANDLE_LAB_RUN_BUDGET_S); $((deadline - SECONDS)) s of it are left"

# --- The steps ------------------------------------------------------------------

# step NAME LIMIT_S [--informational] COMMAND...: runs COMMAND under its own
# limit (clamped to what is left of the budget), its output to logs/NAME.log and
# the terminal, and records its exit code and seconds. It does not start with
# less than 30 s of the budget left (or less than its limit, when that is smaller),
# nor when its program needs a library that was not found.
step() {
  local name=$1 limit=$2 counts=yes
  shift 2
  step_rc=-
  if [[ $1 == --informational ]]; then
    counts=no
    shift
  fi
  if [[ -n $interrupted ]]; then
    record "$name" - 0 "not run: interrupted by SIG$interrupted" "${@#"$bin/"}"
    return 0
  fi
  local arg
  for arg in "$@"; do
    [[ $arg == "$bin"/* && -n ${gap[${arg#"$bin/"}]:-} ]] || continue
    echo "=== $name: skipped, ${arg#"$bin/"} needs ${gap[${arg#"$bin/"}]}, which was not found (see the library gap above)"
    record "$name" - 0 "skipped: needs ${gap[${arg#"$bin/"}]} (not found)" "${@#"$bin/"}"
    [[ $counts == yes ]] && failed+=("$name (a library missing)")
    return 0
  done
  local left=$((deadline - SECONDS - reserve)) need=$start_need
  ((limit < need)) && need=$limit
  if ((left < need)); then
    echo "=== $name: skipped, $((left > 0 ? left : 0)) s of the budget left, under the $need s a step needs to start"
    record "$name" - 0 "skipped: $((left > 0 ? left : 0)) s of the budget left (a step needs $need)" "${@#"$bin/"}"
    [[ $counts == yes ]] && failed+=("$name (not run)")
    return 0
  fi
  local cut=""
  if ((limit > left)); then
    cut=" (cut from $limit s by the budget)"
    limit=$left
  fi
  echo "=== $name (timeout ${limit} s$cut): ${*#"$bin/"}"
  local log=$work/logs/$name.log t0=$EPOCHREALTIME rc
  : > "$log"
  PYTHONUNBUFFERED=1 timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1 < /dev/null 9>&- 3>&- 4>&- &
  step_pid=$!
  tail --pid="$step_pid" -s 0.2 -n +1 -f "$log" 9>&- 3>&- 4>&- &
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
  step_rc=$rc
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

# host_side NAME COMMAND...: in a rehearsal, COMMAND (a step's, without --dry-run)
# run for real on this CPU: with the stand-in driver (every call fails) it stops
# at its first device call, so its time is the step's host side before any
# device work. Logged, and kept in host-side.tsv (summary.md shows it).
host_side() {
  local name=$1 t0=$EPOCHREALTIME rc secs said
  shift
  [[ -z $interrupted ]] || return 0
  timeout 300 "$@" > "$work/logs/$name.host.log" 2>&1 < /dev/null 9>&- 3>&- 4>&-
  rc=$?
  secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  said=$(grep -m 1 '^error' "$work/logs/$name.host.log" || grep -m 1 -i 'error' "$work/logs/$name.host.log" ||
    tail -n 1 "$work/logs/$name.host.log")
  said=$(tr '\t\n' '  ' <<<"${said:0:160}")
  printf '%s\t%s\t%s\t%s\n' "$name" "$secs" "$rc" "$said" >> "$work/host-side.tsv"
  echo "host side of $name: $secs s on this CPU before its first device call (exit $rc: $said)"
}

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

# Each program's argument list is the GPU call's, exactly: each experiment takes
# its own preset (`--preset gpu-call`, or under --cpu `--preset small`: seconds on
# two cores); the extra runs' are here.
preset=gpu-call
[[ $mode == cpu ]] && preset=small
block_weights=$tmp/block-weights.safetensors # what PyTorch's twin loads (not archived: 0.8 GB on a GPU)
if [[ $mode == cuda ]]; then
  matmul_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --no-cpu)
  # PyTorch has its own list: it has no bf16-reduced (no switch for that cuBLAS mode).
  pytorch_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16 --no-cpu)
  cpu_vs_gpu_args=(--size "$size" --iters 20 --warmup 5)
  block_args=(--dtypes fp32,tf32,fp16,bf16)
  kernels_args=()
  sweep_args=(--max-seconds 1)
else
  matmul_args=(--size "$size" --iters 3 --warmup 1 --dtypes fp64,fp32,fp16,bf16)
  pytorch_args=("${matmul_args[@]}")
  cpu_vs_gpu_args=(--size "$size" --iters 4 --warmup 1)
  block_args=(--dtypes fp32,fp16,bf16 --iters 3 --warmup 1)
  kernels_args=(--cases block-prefill,block-decode,smollm2-decode --seq 16 --iters 3 --warmup 1)
  sweep_args=()
fi
matmul_json=$work/matmul-$size.json
pytorch_json=$work/pytorch-matmul-$size.json
export CANDLE_LAB_BIN_DIR="$bin/experiments" CANDLE_LAB_TOOLS_DIR="$bin/tools"
scratch=$tmp/scratch # the tests' working folder, not archived
mkdir -p "$scratch/tests"
for d in results schema tests/fixtures; do
  if [[ -d $start/$d && ! -e $scratch/$d ]]; then ln -s "$start/$d" "$scratch/$d"; fi
done
harness=(--test-threads 1)
((rehearse)) && harness=(--list)

# not_here NAME WHY: a planned step this run cannot run, recorded (not counted).
not_here() { echo "=== $1: skipped, $2" && record "$1" - 0 "skipped: $2 (not counted)" -; }

# twin NAME PACKAGE LIMIT ARGS...: a PyTorch twin, with the python that has torch.
twin() {
  local name=$1 pkg=$2 limit=$3
  shift 3
  [[ -f $bin/pytorch/$pkg/__main__.py ]] || { not_here "$name" "pytorch/$pkg is not in the bundle" && return; }
  [[ -n $torch_py ]] || { not_here "$name" "no python with torch" && return; }
  skip_host "$torch_py" "$bin/pytorch/$pkg"
  local cmd=("$torch_py" "$bin/pytorch/$pkg" --device "$device" "$@" "${host[@]}")
  step "$name" "$limit" "${cmd[@]}" "${dry[@]}"
  if ((rehearse)) && [[ $step_rc == 0 ]]; then host_side "$name" "${cmd[@]}"; fi
}

# compare_step NAME LIMIT CANDLE PYTORCH: tools/compare on the two files (a
# rehearsal writes none: compare then checks its arguments only).
compare_step() {
  local name=$1 limit=$2 a=$3 b=$4
  [[ -x $bin/tools/compare ]] || { not_here "$name" "tools/compare is not in the bundle" && return; }
  [[ -n $torch_py ]] || { not_here "$name" "no python with torch, so no PyTorch file to compare" && return; }
  if ((!rehearse)) && [[ ! -f $a || ! -f $b ]]; then
    not_here "$name" "no $(basename "$([[ -f $a ]] && echo "$b" || echo "$a")") (its run failed)"
    return
  fi
  step "$name" "$limit" --informational "$bin/tools/compare" "$a" "$b" "${dry[@]}"
}

# program NAME LIMIT EXE ARGS...: a Rust program of the bundle with its host flag.
program() {
  local name=$1 limit=$2 exe=$3
  shift 3
  [[ -x $exe ]] || { not_here "$name" "${exe#"$bin/"} is not in the bundle" && return; }
  skip_host "$exe"
  local cmd=("$exe" --device "$device" "$@" "${host[@]}")
  step "$name" "$limit" "${cmd[@]}" "${dry[@]}"
  if ((rehearse)) && [[ $step_rc == 0 ]]; then host_side "$name" "${cmd[@]}"; fi
}

# run_planned NAME LIMIT: the step NAME of the plan.
run_planned() {
  local name=$1 limit=$2
  case $name in
    nvidia-smi)
      step nvidia-smi "$limit" nvidia-smi
      timeout 10 nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv > "$work/gpu.csv" 2>&1
      cp "$work/logs/nvidia-smi.log" "$work/nvidia-smi.txt"
      ;;
    matmul-"$size") program "$name" "$limit" "$bin/experiments/matmul" "${matmul_args[@]}" --output "$matmul_json" ;;
    cpu_vs_gpu-"$size")
      program "$name" "$limit" "$bin/experiments/cpu_vs_gpu" "${cpu_vs_gpu_args[@]}" --output "$work/$name.json"
      ;;
    pytorch-matmul-"$size") twin "$name" matmul "$limit" "${pytorch_args[@]}" --output "$pytorch_json" ;;
    pytorch-block)
      if ((!rehearse)) && [[ ! -f $block_weights ]]; then
        not_here "$name" "no block weights to load (the block step wrote none)"
      else
        twin "$name" block "$limit" --weights "$block_weights" "${block_args[@]}" --output "$work/$name.json"
      fi
      ;;
    pytorch-kernels)
      # Candle's file, when its step wrote one, gives the twin its bounds (the
      # same ladder points); a rehearsal has none, and the twin measures its own.
      local bounds=()
      [[ -f $work/kernels.json ]] && bounds=(--bounds "$work/kernels.json")
      twin "$name" kernels "$limit" "${kernels_args[@]}" "${bounds[@]}" --output "$work/$name.json"
      ;;
    compare) compare_step "$name" "$limit" "$matmul_json" "$pytorch_json" ;;
    compare-block) compare_step "$name" "$limit" "$work/block.json" "$work/pytorch-block.json" ;;
    compare-kernels) compare_step "$name" "$limit" "$work/kernels.json" "$work/pytorch-kernels.json" ;;
    test-*)
      local t=$bin/tests/${name#test-}
      [[ -x $t ]] || { not_here "$name" "tests/${name#test-} is not in the bundle" && return; }
      cd "$scratch" || stop "cannot enter $scratch"
      step "$name" "$limit" "$t" "${harness[@]}"
      cd "$start" || stop "cannot return to $start"
      ;;
    *)
      local args=(--preset "$preset" --output "$work/$name.json")
      [[ $name == block ]] && args+=(--save-weights "$block_weights")
      [[ $name == sweep ]] && args+=("${sweep_args[@]}")
      program "$name" "$limit" "$bin/experiments/$name" "${args[@]}"
      if ((rehearse)) && [[ $name == generate && -x $bin/experiments/generate ]]; then
        # generate's host side after the device opens (the weights made once, a
        # quantized row's GGUF, each row's model loaded) on this CPU, as the
        # bundle's release program does it: --prepare-only on the CPU device,
        # the preset's rows less tf32 (a cuBLAS mode over fp32's weights).
        host_side generate-prepare "$bin/experiments/generate" --preset gpu-call --device cpu \
          --dtypes stored,fp32,fp16,bf16 --skip-host-memory-check --prepare-only
        local took
        took=$(sed -n 's/^--prepare-only: \([0-9.]*\) s in all.*/\1/p' "$work/logs/generate-prepare.host.log")
        echo "host side of generate, its weights and models: ${took:-?} s here ($(nproc) cores; the H200 machine has 16), of the $generate_host s its limit assumes"
      fi
      ;;
  esac
}

for i in "${!P_NAME[@]}"; do
  name=${P_NAME[$i]}
  why=$(why_not "$i")
  [[ $why != "not run on the CPU" ]] || continue
  if [[ -n $why ]]; then
    record "$name" - 0 "$why" -
    continue
  fi
  if [[ -n $interrupted ]]; then
    record "$name" - 0 "not run: interrupted by SIG$interrupted" -
    continue
  fi
  run_planned "$name" "$(limit_of "$i")"
done

# A program or test harness of the bundle that the plan does not name is not
# run: its limit would be a guess, and the call's sum would no longer hold.
planned=" ${P_NAME[*]} "
for exe in "$bin"/experiments/* "$bin"/tests/*; do
  [[ -f $exe ]] || continue
  name=$(basename "$exe")
  [[ $exe == */tests/* ]] && name=test-$name
  [[ $planned != *" $name "* ]] || continue
  echo "=== $name: not in the plan (scripts/gpu-run.sh's PLAN): not run"
  record "$name" - 0 "not in the plan: not run (give it a line in PLAN)" "${exe#"$bin/"}"
  failed+=("$name (not in the plan)")
done

if ((${#failed[@]})); then
  finish 1
fi
finish 0
