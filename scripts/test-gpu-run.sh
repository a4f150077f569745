#!/usr/bin/env bash
# shellcheck disable=SC2012,SC2016 # ls of our own files; sed patterns hold a literal $size
# Tests of scripts/gpu-run.sh, the one-call GPU run, on a machine without a GPU:
#
#   scripts/test-gpu-run.sh cpu         summary.py's tests; the CPU bundle (`just
#                                       pack-cpu`): a whole run from a copy of the
#                                       checkout at another path with this checkout
#                                       hidden (as the GPU machine runs it), a hanging
#                                       step, SIGTERM and Ctrl-C, an OUT_DIR with an
#                                       earlier run, a missing or truncated bundle
#   scripts/test-gpu-run.sh rehearsal   the CUDA bundle (`just pack-gpu`) through the
#                                       CUDA branch, every step with the GPU call's exact
#                                       arguments stopped after checking them, with
#                                       stand-ins for the GPU machine: a driver folder
#                                       on neither PATH nor the linker's path (an
#                                       nvidia-smi that answers as an H200's, the link
#                                       stub of libcuda.so.1), python3 with torch from
#                                       the PyTorch reference's venv; every step whose
#                                       program accepts --skip-host-memory-check was
#                                       given it, each compare right after its runs, the
#                                       run's own JIT cache. Then the same with a refused
#                                       flag planted in the plan, with PyTorch given
#                                       matmul's precisions (bf16-reduced), with the host
#                                       flag withheld (a few steps, CANDLE_LAB_STEPS),
#                                       with no driver, and with no xz program.
#
# Each case prints one line; the first failure ends the script with exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "test-gpu-run: FAILED: $*" >&2
  exit 1
}
last=$SECONDS
pass() {
  echo "test-gpu-run: ok ($((SECONDS - last)) s): $*"
  last=$SECONDS
}

# The venv's python3 first on PATH, as the GPU machine's python3 has torch.
torch_bin=$(dirname "$(scripts/pytorch-env.sh)")

# after SUMMARY STEP: the step that ran right after STEP in summary.md's steps table.
after() {
  awk -F' [|] ' -v s="| $2" '/^[|] / { if (found) { sub(/^[|] /, "", $1); print $1; exit } if ($1 == s) found = 1 }' "$1"
}

# assert_compares_follow SUMMARY PYTORCH_MATMUL: each compare runs right after the
# runs it compares, before anything the budget could cut (issue 22, defect 3).
assert_compares_follow() {
  [[ $(after "$1" "$2") == compare ]] || fail "compare does not run right after $2 but after $(grep -B1 '^| compare |' "$1" | head -n 1)"
  [[ $(after "$1" pytorch-block) == compare-block ]] || fail "compare-block does not run right after pytorch-block"
  [[ $(after "$1" pytorch-kernels) == compare-kernels ]] || fail "compare-kernels does not run right after pytorch-kernels"
}

# assert_files DIR: a run's OUT_DIR holds exactly its three files.
assert_files() {
  [[ $(ls "$1") == $'results.tar.gz\nrun.log\nsummary.md' ]] || fail "$1 holds: $(ls "$1" | tr '\n' ' ')"
}

# unpack_bundle ARCHIVE DIR, repack DIR ARCHIVE: a bundle to change, and back
# (plain tar, quick; SHA256SUMS made again, as pack.sh makes it).
unpack_bundle() { mkdir -p "$2" && tar -xf "$1" -C "$2"; }
repack() {
  local sums
  sums=$(cd "$1" && find . -type f ! -name SHA256SUMS -printf '%P\n' | sort | xargs -d '\n' sha256sum)
  echo "$sums" > "$1/SHA256SUMS"
  tar -cf "$2" -C "$1" .
}

# edit FILE PATTERN REPLACEMENT: sed that must change something.
edit() {
  local before
  before=$(sha256sum < "$1")
  sed -i "s|$2|$3|" "$1"
  [[ $(sha256sum < "$1") != "$before" ]] || fail "the pattern '$2' is no longer in $1: update this test"
}

# moved_copy DIR: what the device tool carries to the GPU machine (the tracked
# files and the untracked ones git does not ignore), copied to DIR, with BUNDLE
# in DIR/.gpu-bundle/ as `carry` would bring it.
moved_copy() {
  mkdir -p "$1/.gpu-bundle"
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ ! -e $f ]] || printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$1"
  cp "$2" "$1/.gpu-bundle/"
}

# hidden ROOT DIR COMMAND...: COMMAND run in DIR while ROOT (this checkout, where
# the bundle was built) is hidden: an empty tmpfs mounted over it in a private
# mount namespace, so nothing of the run can read a path the build fixed. As root
# `unshare -m`; elsewhere `unshare -rm` (a user namespace where the user is root).
hidden() {
  local root=$1 dir=$2 flags
  shift 2
  for flags in -m -rm; do
    # shellcheck disable=SC2016 # expanded by the inner shell
    if unshare "$flags" sh -c 'mount -t tmpfs -o size=1m candle-lab-hidden "$1"' _ "$root" 2>/dev/null; then
      unshare "$flags" bash -c '
        mount -t tmpfs -o size=1m,mode=0555 candle-lab-hidden "$1" || exit 97
        [[ -z $(ls -A "$1") ]] || exit 98
        cd "$2" && exec "${@:3}"' hide "$root" "$dir" "$@"
      return
    fi
  done
  fail "cannot hide $root for the moved run: neither 'unshare -m' nor 'unshare -rm' may mount a tmpfs here ($(unshare -m true 2>&1 | tail -n 1))"
}

cpu_tests() {
  local bundle=.gpu-bundle/candle-lab-cpu.tar.xz
  [[ -f $bundle ]] || fail "no $bundle: run just pack-cpu"

  # 0. summary.py's own tests (a real block file, an unsupported row).
  python3 -m unittest discover -s scripts -p 'test_*.py' 2> "$tmp/unittest.txt" || {
    cat "$tmp/unittest.txt"
    fail "scripts/test_*.py failed"
  }
  pass "summary.py: $(grep -o '^Ran [0-9]* tests' "$tmp/unittest.txt")"

  # 1. A whole run: every program, the extra runs, PyTorch, the tests, compare,
  # as the GPU machine runs it: from a copy of the checkout at another path, the
  # building checkout hidden (a path the build fixed into a program or test,
  # CARGO_MANIFEST_DIR's, then fails its step here as it would there).
  local root=$PWD moved=$tmp/elsewhere/candle-lab-moved
  case "$tmp/" in "$root"/*) fail "TMPDIR ($tmp) is inside the checkout, which the run hides" ;; esac
  case "$torch_bin/" in "$root"/*) fail "torch's python ($torch_bin) is inside the checkout, which the run hides" ;; esac
  moved_copy "$moved" "$bundle"
  hidden "$root" "$moved" env PATH="$torch_bin:$PATH" scripts/gpu-run.sh --cpu "$tmp/run" > "$tmp/run.txt" 2>&1 || {
    tail -n 20 "$tmp/run.txt"
    [[ ! -f $tmp/run/summary.md ]] || cat "$tmp/run/summary.md"
    fail "the CPU run from $moved, with $root hidden, failed"
  }
  assert_files "$tmp/run"
  local archive
  archive=$(tar -tzf "$tmp/run/results.tar.gz")
  for name in $(tar -tJf $bundle | sed -n 's|^\./experiments/||p'); do
    grep -qx "results/$name.json" <<<"$archive" || fail "no $name.json in the archive"
    grep -q "^| $name | 0 |" "$tmp/run/summary.md" || fail "no passing $name step in summary.md"
  done
  for name in $(tar -tJf $bundle | sed -n 's|^\./tests/||p'); do
    grep -q "^| test-$name | 0 |" "$tmp/run/summary.md" || fail "no passing test-$name step"
  done
  grep -q '^| pytorch-matmul-192 | 0 |' "$tmp/run/summary.md" || fail "no passing PyTorch step"
  grep -q '^| compare | 0 |' "$tmp/run/summary.md" || fail "no passing compare step"
  grep -q '^| pytorch-block | 0 |' "$tmp/run/summary.md" || fail "no passing PyTorch block step"
  grep -q '^| compare-block | 0 |' "$tmp/run/summary.md" || fail "no passing compare-block step"
  grep -q '^| pytorch-kernels | 0 |' "$tmp/run/summary.md" || fail "no passing PyTorch kernels step"
  grep -q '^| compare-kernels | 0 |' "$tmp/run/summary.md" || fail "no passing compare-kernels step"
  assert_compares_follow "$tmp/run/summary.md" pytorch-matmul-192
  # The block's rows in summary.md hold their figures (median ms, GFLOP/s, peak MiB).
  local figures='[0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \| ok \|$' phase
  for phase in prefill decode; do
    grep -Eq "^\| block\.json \| block\.phases\.$phase\.rows \| fp32 \| $figures" "$tmp/run/summary.md" ||
      fail "summary.md's $phase block row has no figures: $(grep "^| block.json | block.phases.$phase" "$tmp/run/summary.md" | head -n 1)"
  done
  grep -q '^  MemTotal:' "$tmp/run/run.log" || fail "run.log does not show /proc/meminfo"
  tail -n 1 "$tmp/run/run.log" | grep -qx 'every step passed' || fail "run.log does not end with the verdict"
  grep -q "^bundle: $moved/.gpu-bundle/" "$tmp/run/run.log" || fail "the run did not use the moved copy's bundle"
  pass "a whole CPU run from another path, the building checkout hidden: $(grep -c '^| [a-z]' "$tmp/run/summary.md") rows in summary.md, the log whole"

  # 2. A hang costs its step only: a bundle with one more "experiment" that never
  # ends; under 10-second timeouts the run ends, fails, names it, keeps the rest.
  unpack_bundle $bundle "$tmp/hang"
  printf '#!/bin/sh\nexec sleep 600.5\n' > "$tmp/hang/experiments/hang"
  chmod +x "$tmp/hang/experiments/hang"
  # A second one, so that the hangs alone take 20 of the 60 s budget: what is
  # left (less the 15 s kept for the summary) cannot hold every other step, so
  # the last ones are skipped, which the budget's own accounting then shows.
  cp "$tmp/hang/experiments/hang" "$tmp/hang/experiments/hang2"
  repack "$tmp/hang" "$tmp/hang.tar"
  if CANDLE_LAB_RUN_BUDGET_S=60 CANDLE_LAB_STEP_TIMEOUT_S=10 scripts/gpu-run.sh --cpu "$tmp/short" "$tmp/hang.tar" > /dev/null; then
    fail "a run with a hanging step passed"
  fi
  grep -q '^| hang | 124 | .* | timed out after 10 s |' "$tmp/short/summary.md" || fail "the hang is not named"
  grep -q '^| matmul | 0 |' "$tmp/short/summary.md" || fail "the steps after the hang did not run"
  grep -q 'failed: hang (exit 124), hang2 (exit 124), ' "$tmp/short/summary.md" || fail "no verdict naming the hangs"
  grep -q '^| test-sweep | - | 0 | skipped: budget spent |' "$tmp/short/summary.md" || fail "the budget did not stop the run"
  assert_files "$tmp/short"
  pass "a hanging program loses its step only"

  # 3. SIGTERM to the script, and Ctrl-C (SIGINT to its process group, as a
  # terminal sends it): the step and its processes stop, no other step runs, the
  # summary is written. The hanging program runs first here.
  mv "$tmp/hang/experiments/hang" "$tmp/hang/experiments/0hang"
  rm "$tmp/hang/experiments/hang2"
  repack "$tmp/hang" "$tmp/hang.tar"
  local sig
  for sig in TERM INT; do
    local dir=$tmp/sig-$sig
    # Its own session, SIGINT at its default (a background job's is ignored).
    setsid env --default-signal=INT scripts/gpu-run.sh --cpu "$dir" "$tmp/hang.tar" > /dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 600); do
      grep -q '^=== 0hang (timeout' "$dir/run.log" 2>/dev/null && break
      sleep 0.1
    done
    grep -q '^=== 0hang (timeout' "$dir/run.log" || fail "the hang step did not start in a minute"
    sleep 0.5
    if [[ $sig == TERM ]]; then kill -TERM "$pid"; else kill -INT -- "-$pid"; fi
    local rc=0 t0=$SECONDS
    wait "$pid" || rc=$?
    local want=130
    [[ $sig == INT ]] || want=143
    ((rc == want)) || fail "SIG$sig: exit $rc, not $want"
    ((SECONDS - t0 < 30)) || fail "SIG$sig: the run took $((SECONDS - t0)) s to stop"
    pgrep -f 'sleep 600.5' > /dev/null && fail "SIG$sig: the hanging step's process is still running"
    assert_files "$dir"
    grep -q "^\*\*Stopped: interrupted by SIG$sig" "$dir/summary.md" || fail "SIG$sig: summary.md does not say so"
    grep -q '^| matmul | - | 0 | not run: interrupted' "$dir/summary.md" || fail "SIG$sig: a step ran after it"
    grep -q "^interrupted by SIG$sig" "$dir/run.log" || grep -q "stopped: interrupted by SIG$sig" "$dir/run.log" ||
      fail "SIG$sig: run.log lost its last lines"
  done
  pass "SIGTERM and Ctrl-C stop the step and the run (143, 130), with the summary"

  # 4. An earlier run is never touched, and a mistyped bundle changes nothing.
  local before
  before=$(cd "$tmp/run" && sha256sum ./*)
  local rc=0
  scripts/gpu-run.sh --cpu "$tmp/run" > "$tmp/refused.txt" 2>&1 || rc=$?
  ((rc == 2)) || fail "a run into a used OUT_DIR exited $rc"
  grep -q "holds files" "$tmp/refused.txt" || fail "no reason given: $(cat "$tmp/refused.txt")"
  [[ $(cd "$tmp/run" && sha256sum ./*) == "$before" ]] || fail "the earlier run's files changed"
  rc=0
  scripts/gpu-run.sh --cpu "$tmp/new" "$tmp/no-such-bundle.tar.xz" > "$tmp/refused.txt" 2>&1 || rc=$?
  ((rc == 1)) || fail "a missing bundle: exit $rc"
  [[ ! -e $tmp/new ]] || fail "a missing bundle: OUT_DIR was made"
  grep -q '^error: no bundle at' "$tmp/refused.txt" || fail "no reason given: $(cat "$tmp/refused.txt")"
  rc=0
  CANDLE_LAB_STEPS='(' scripts/gpu-run.sh --cpu "$tmp/new" > "$tmp/refused.txt" 2>&1 || rc=$?
  ((rc == 2)) || fail "CANDLE_LAB_STEPS='(': exit $rc"
  [[ ! -e $tmp/new ]] || fail "a bad CANDLE_LAB_STEPS: OUT_DIR was made"
  grep -q "^error: CANDLE_LAB_STEPS '(' is not a regular expression" "$tmp/refused.txt" || fail "no reason given: $(cat "$tmp/refused.txt")"
  pass "an OUT_DIR with files is refused untouched; a missing bundle or a bad CANDLE_LAB_STEPS creates nothing"

  # 5. A truncated bundle stops the run before any step, with a summary saying so.
  head -c "$(($(stat -c %s $bundle) / 2))" $bundle > "$tmp/truncated.tar.xz"
  rc=0
  scripts/gpu-run.sh --cpu "$tmp/trunc" "$tmp/truncated.tar.xz" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a truncated bundle exited $rc"
  assert_files "$tmp/trunc"
  grep -q '^\*\*Stopped: cannot unpack' "$tmp/trunc/summary.md" || fail "summary.md: $(head -n 5 "$tmp/trunc/summary.md")"
  pass "a truncated bundle: exit 1, summary says it cannot be unpacked"
}

# A stand-in for the GPU machine's driver folder (/usr/local/nvidia): bin/nvidia-smi
# answering as an H200's does, and lib64/libcuda.so.1, the toolchain's link stub
# (every entry point returns CUDA_ERROR_STUB_LIBRARY: a dry run calls none).
make_driver() {
  local d=$1
  mkdir -p "$d/bin" "$d/lib64"
  # shellcheck disable=SC1090
  source "$(scripts/cuda-toolchain.sh)"
  cp "$CUDA_HOME/lib/stubs/libcuda.so" "$d/lib64/libcuda.so.1"
  cat > "$d/bin/nvidia-smi" <<'SMI'
#!/usr/bin/env bash
# A stand-in: answers the queries gpu-run.sh makes as an H200 with driver 580 does.
declare -A v=([name]="NVIDIA H200" [compute_cap]="9.0" [memory.total]="143771 MiB" [driver_version]="580.159.04")
declare -A h=([name]="name" [compute_cap]="compute_cap" [memory.total]="memory.total [MiB]" [driver_version]="driver_version")
query="" header=1
for a in "$@"; do
  case $a in
    --query-gpu=*) query=${a#--query-gpu=} ;;
    --format=*noheader*) header=0 ;;
  esac
done
if [[ -z $query ]]; then
  echo "| NVIDIA-SMI 580.159.04    Driver Version: 580.159.04    CUDA Version: 13.0 |"
  echo "|   0  NVIDIA H200    On  |   00000000:00:05.0 Off |  0MiB / 143771MiB |"
  exit 0
fi
IFS=, read -ra fields <<<"$query"
line() { local out=() f; for f in "${fields[@]}"; do out+=("$1[$f]"); done; (IFS=,; echo "${out[*]}" | sed 's/,/, /g'); }
names=() values=()
for f in "${fields[@]}"; do
  [[ -v v[$f] ]] || { echo "Field \"$f\" is not a valid field to query." >&2; exit 2; }
  names+=("${h[$f]}") values+=("${v[$f]}")
done
if ((header)); then (IFS=,; echo "${names[*]}" | sed 's/,/, /g'); fi
(IFS=,; echo "${values[*]}" | sed 's/,/, /g')
SMI
  chmod +x "$d/bin/nvidia-smi"
}

# missing_host_flag LOG BUNDLE_DIR: the steps in a rehearsal's LOG whose program
# (from the unpacked bundle; PyTorch's through the python the step named) lists
# --skip-host-memory-check in its --help but was not given it, one a line.
missing_host_flag() {
  local log=$1 dir=$2 line name words prog help
  # The programs start as on the GPU machine: its driver (the stand-in) and CUDA libraries.
  local libs
  libs=$(sed -n 's|^driver: \(.*\)/libcuda.so.1 .*|\1|p; s|^CUDA libraries: ||p' "$log" | tr '\n' ':')
  while IFS= read -r line; do
    name=${line#=== } && name=${name%% (timeout*}
    read -ra words <<<"${line#*): }"
    case ${words[0]} in
      experiments/* | tools/* | tests/*) prog=("$dir/${words[0]}") ;;
      *)
        prog=("${words[0]}")
        if [[ ${words[1]:-} == pytorch/* ]]; then prog+=("$dir/${words[1]}"); fi
        ;;
    esac
    help=$(LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:-}" timeout 30 "${prog[@]}" --help 2>/dev/null) || true
    if [[ $help == *--skip-host-memory-check* && " ${words[*]} " != *" --skip-host-memory-check "* ]]; then
      echo "$name"
    fi
  done < <(grep '^=== .* (timeout [0-9]* s): ' "$log")
}

rehearsal_tests() {
  local bundle=.gpu-bundle/candle-lab-cuda.tar.xz
  [[ -f $bundle ]] || fail "no $bundle: run just pack-gpu"
  local driver=$tmp/nvidia
  make_driver "$driver"
  command -v nvidia-smi > /dev/null && fail "nvidia-smi is on PATH here: the stand-in would not be tested"
  rehearse() { # OUT_DIR [BUNDLE]: the rehearsal as CI runs it
    CANDLE_LAB_DRIVER_ROOT=$driver PATH="$torch_bin:$PATH" scripts/gpu-run.sh --rehearse "$@"
  }

  # 1. The rehearsal passes, every step accepted, each found in the bundle.
  rehearse "$tmp/r" > "$tmp/r.txt" 2>&1 || {
    cat "$tmp/r.txt"
    fail "the rehearsal failed"
  }
  assert_files "$tmp/r"
  local s=$tmp/r/summary.md
  grep -q '^# candle-lab rehearsal of the cuda run' "$s" || fail "summary.md does not say rehearsal"
  grep -q "^driver: $driver/lib64/libcuda.so.1 (not in the linker's cache" "$tmp/r/run.log" || fail "run.log does not say where the driver was"
  grep -q "^nvidia-smi: $driver/bin/nvidia-smi" "$tmp/r/run.log" || fail "nvidia-smi was not found in the driver folder"
  local name steps=(nvidia-smi matmul-8192 cpu_vs_gpu-8192 pytorch-matmul-8192 pytorch-block compare compare-block pytorch-kernels compare-kernels)
  for name in $(tar -tJf $bundle | sed -n 's|^\./experiments/||p'); do steps+=("$name"); done
  for name in $(tar -tJf $bundle | sed -n 's|^\./tests/||p'); do steps+=("test-$name"); done
  for name in "${steps[@]}"; do
    grep -q "^| $name | 0 | [0-9.]* | rehearsed: arguments accepted |" "$s" || fail "no rehearsed $name step in summary.md"
  done
  # The exact argument lists, as the GPU call runs them.
  grep -q '^=== matmul-8192 .*--device cuda --size 8192 --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --no-cpu --skip-host-memory-check --output .* --dry-run$' "$tmp/r/run.log" ||
    fail "matmul-8192's argument list is not the GPU call's"
  # The four CUDA tests that used to run nowhere are in the bundle's harnesses.
  local logs=$tmp/r-logs
  mkdir -p "$logs" && tar -xzf "$tmp/r/results.tar.gz" -C "$logs"
  grep -q '^cuda::writes_json_csv_and_svg: test' "$logs/results/logs/test-sweep.log" || fail "the CUDA sweep test is not packed"
  grep -q '^memory_fields_cuda: test' "$logs/results/logs/test-memory_overhead.log" || fail "memory_fields_cuda is not packed"
  grep -q '^overhead_fields_cuda: test' "$logs/results/logs/test-memory_overhead.log" || fail "overhead_fields_cuda is not packed"
  grep -q '^cuda::summary_of_a_fresh_run: test' "$logs/results/logs/test-summary.log" || fail "the CUDA summary test is not packed"
  grep -q '^tiny_block_cuda: test' "$logs/results/logs/test-block.log" || fail "the CUDA block test is not packed"
  grep -q '^random_weights_run_at_the_tiny_shape_on_cuda: test' "$logs/results/logs/test-generate.log" ||
    fail "the CUDA generate test is not packed"
  grep -q '^error::tests::candles_cublas_refusal_is_unsupported: test' "$logs/results/logs/test-candle_lab.log" ||
    fail "the CUDA test of cuBLAS's refusal is not packed"
  grep -q '_cuda: test' "$logs/results/logs/test-kernels.log" || fail "the CUDA kernels tests are not packed"
  grep -q 'cuda.*: test' "$logs/results/logs/test-generate.log" || fail "the CUDA generate test is not packed"
  # Each experiment's GPU-call preset, as its plan shows it: the block with the
  # suite's kernels timed beside candle-nn's, generate at a Llama-3.2-1B's shape.
  grep -q '^=== block .*--preset gpu-call' "$tmp/r/run.log" || fail "block was not given its gpu-call preset"
  grep -q 'Both' "$logs/results/logs/block.log" || fail "the GPU call's block does not time both kernel sets"
  grep -q 'llama-3.2-1b\|Llama-3.2-1B' "$logs/results/logs/generate.log" || fail "the GPU call's generate is not at the 1B shape"
  pass "the rehearsal: ${#steps[@]} steps accepted their arguments; the driver found in a folder on neither path"

  # The GPU machine's memory grows on demand (issue 22, defect 1): every step
  # whose program's --help lists --skip-host-memory-check was given it, PyTorch's
  # too, and the log shows /proc/meminfo. Each program is asked here, apart
  # from gpu-run.sh's own reading of the same.
  local programs=$tmp/r-bundle
  mkdir -p "$programs" && tar -xJf $bundle -C "$programs"
  local missing
  missing=$(missing_host_flag "$tmp/r/run.log" "$programs")
  [[ -z $missing ]] || fail "steps not given --skip-host-memory-check though their program accepts it: $missing"
  local given
  given=$(grep -c '^=== .*--skip-host-memory-check' "$tmp/r/run.log")
  for name in block memory sweep matmul-8192 pytorch-matmul-8192 pytorch-block; do
    grep -q "^=== $name (timeout.* --skip-host-memory-check" "$tmp/r/run.log" || fail "$name was not given --skip-host-memory-check"
  done
  grep -q '^  MemTotal:' "$tmp/r/run.log" || fail "run.log does not show /proc/meminfo"
  pass "the host check: $given steps given --skip-host-memory-check, every one whose program accepts it"

  # The comparisons come right after their runs (defect 3); one JIT cache of
  # the run's own for the ~35 CUDA processes (defect 4).
  assert_compares_follow "$s" pytorch-matmul-8192
  grep -q '^CUDA JIT cache: /.*/cuda-cache (CUDA_CACHE_MAXSIZE=4294967296)$' "$tmp/r/run.log" || fail "no CUDA JIT cache of the run's own"
  grep -q '^CUDA JIT cache at the end: [0-9]* files' "$tmp/r/run.log" || fail "the JIT cache's size at the end is not logged"
  pass "compare and compare-block right after their runs; the run's own JIT cache (CUDA_CACHE_PATH)"

  # 2. A refused flag planted in the plan fails the rehearsal, naming its step.
  # (The plan is the script's: a copy of it is planted and run on the same bundle.)
  cp scripts/gpu-run.sh "$tmp/planted-flag.sh"
  edit "$tmp/planted-flag.sh" 'bf16-reduced --no-cpu)$' 'bf16-reduced --no-cpu --bogus-flag)'
  local rc=0
  CANDLE_LAB_DRIVER_ROOT=$driver PATH="$torch_bin:$PATH" "$tmp/planted-flag.sh" --rehearse "$tmp/p1" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a planted --bogus-flag: exit $rc"
  grep -q 'failed: matmul-8192 (exit 2)$' "$tmp/p1/summary.md" || fail "the planted flag's step is not named: $(grep failed "$tmp/p1/summary.md")"
  grep -q 'unexpected argument .--bogus-flag' "$tmp/p1/run.log" || fail "the log does not show the refusal"
  pass "a planted refused flag fails the rehearsal, naming matmul-8192"

  # 3. Defect 1 re-planted: PyTorch given matmul's precisions, bf16-reduced with them.
  cp scripts/gpu-run.sh "$tmp/planted-dtype.sh"
  edit "$tmp/planted-dtype.sh" 'pytorch_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16 ' \
    'pytorch_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced '
  rc=0
  CANDLE_LAB_DRIVER_ROOT=$driver PATH="$torch_bin:$PATH" "$tmp/planted-dtype.sh" --rehearse "$tmp/p2" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "PyTorch with bf16-reduced: exit $rc"
  grep -q 'failed: pytorch-matmul-8192 (exit 2)$' "$tmp/p2/summary.md" || fail "the PyTorch step is not named"
  pass "PyTorch given bf16-reduced (defect 1) fails the rehearsal, naming pytorch-matmul-8192"

  # 3b. The host flag withheld: the check above names the steps. A few steps
  # only (CANDLE_LAB_STEPS, as a rerun selects them); the others not counted.
  cp scripts/gpu-run.sh "$tmp/planted-host.sh"
  edit "$tmp/planted-host.sh" 'if has --skip-host-memory-check; then host=(--skip-host-memory-check); fi' ':'
  CANDLE_LAB_STEPS='^(block|pytorch-block|test-cli)$' CANDLE_LAB_DRIVER_ROOT=$driver PATH="$torch_bin:$PATH" \
    "$tmp/planted-host.sh" --rehearse "$tmp/p3" > /dev/null 2>&1 || fail "the rehearsal of three steps failed"
  missing=$(missing_host_flag "$tmp/p3/run.log" "$programs" | tr '\n' ' ')
  [[ $missing == 'block pytorch-block ' ]] || fail "the withheld host flag was not found: '$missing'"
  grep -q '^| test-cli | 0 | .* | rehearsed: arguments accepted |' "$tmp/p3/summary.md" || fail "test-cli was not selected"
  grep -q '^| matmul | - | 0 | not selected (CANDLE_LAB_STEPS; not counted) |' "$tmp/p3/summary.md" || fail "matmul ran though not selected"
  grep -q 'every step accepted its arguments' "$tmp/p3/summary.md" || fail "steps not selected were counted"
  pass "the host flag withheld is found (block, pytorch-block); CANDLE_LAB_STEPS runs only the steps it names"

  # 4. No driver anywhere: the run stops before any step, and says where it looked.
  rc=0
  CANDLE_LAB_DRIVER_ROOT=$tmp/no-driver PATH="$torch_bin:$PATH" scripts/gpu-run.sh --rehearse "$tmp/nd" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "no driver: exit $rc"
  assert_files "$tmp/nd"
  grep -q "^\*\*Stopped: libcuda.so.1 (the NVIDIA driver) is in neither the linker's cache" "$tmp/nd/summary.md" ||
    fail "no driver: summary.md says $(sed -n 3p "$tmp/nd/summary.md")"
  pass "no driver: exit 1, summary says where it looked"

  # 5. A machine without the xz program: python3 unpacks the bundle.
  local shim=$tmp/no-xz-bin dir f
  mkdir -p "$shim"
  IFS=: read -ra dirs <<<"$torch_bin:$PATH"
  for dir in "${dirs[@]}"; do
    for f in "$dir"/*; do
      case $(basename "$f") in xz | unxz | xzcat | lzma | unlzma | lzcat | xzdec) continue ;; esac
      [[ -e $shim/$(basename "$f") ]] || ln -s "$f" "$shim/" 2>/dev/null || true
    done
  done
  PATH=$shim command -v xz > /dev/null && fail "xz is still on the shim PATH"
  # (torch's python named by CANDLE_LAB_PYTHON: a link to a venv's python is not the venv.)
  CANDLE_LAB_PYTHON=$torch_bin/python3 CANDLE_LAB_DRIVER_ROOT=$driver PATH=$shim \
    scripts/gpu-run.sh --rehearse "$tmp/noxz" > /dev/null 2>&1 || {
    cat "$tmp/noxz/summary.md"
    fail "the rehearsal without xz failed"
  }
  grep -q '^unpacking with python3 (no xz on PATH)' "$tmp/noxz/run.log" || fail "python3 did not unpack"
  grep -qx "python with torch: $torch_bin/python3" "$tmp/noxz/run.log" || fail "CANDLE_LAB_PYTHON was not the python used"
  pass "without xz, python3 unpacks the bundle; CANDLE_LAB_PYTHON names the python; the rehearsal passes"
}

case ${1:-} in
  cpu) cpu_tests ;;
  rehearsal) rehearsal_tests ;;
  *) echo "usage: scripts/test-gpu-run.sh cpu | rehearsal" >&2 && exit 2 ;;
esac
