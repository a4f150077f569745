#!/usr/bin/env bash
# shellcheck disable=SC2012,SC2016 # ls of our own files; sed patterns hold a literal $size
# Tests of scripts/gpu-run.sh, the GPU calls' script, on a machine without a GPU:
#
#   scripts/test-gpu-run.sh cpu         the plan (both GPU calls fit their budgets,
#                                       docs/gpu.md's timeline is the plan printed, a
#                                       planted plan over budget is refused); summary.py's
#                                       tests; the CPU bundle (`just pack-cpu`): a whole
#                                       run from a copy of the checkout at another path
#                                       with this checkout hidden (as the GPU machine runs
#                                       it), in the plan's order; a rerun reusing the
#                                       unpacked bundle; a hanging step; a step that
#                                       overruns its limit, after which no step starts
#                                       with under 30 s left; SIGTERM and Ctrl-C; an
#                                       OUT_DIR with an earlier run; a missing or
#                                       truncated bundle; a planted missing library,
#                                       which skips only its program's step
#   scripts/test-gpu-run.sh rehearsal   the CUDA bundle (`just pack-gpu`) through the
#                                       CUDA branch, both calls' every step with the GPU
#                                       call's exact arguments stopped after checking them,
#                                       with stand-ins for the GPU machine: a driver folder
#                                       on neither PATH nor the linker's path (an
#                                       nvidia-smi that answers as an H200's, the link
#                                       stub of libcuda.so.1, a libnvidia-ml.so.1), python3
#                                       with torch from the PyTorch reference's venv; every
#                                       step whose program accepts --skip-host-memory-check
#                                       was given it, each compare right after its runs, the
#                                       JIT cache in the rerun folder; the host side of each
#                                       step timed, generate's within what its limit
#                                       assumes, the setup within its allowance. Then the
#                                       same with a refused flag planted in the plan, with
#                                       PyTorch given matmul's precisions (bf16-reduced),
#                                       with the host flag withheld (a few steps,
#                                       CANDLE_LAB_STEPS), with a CUDA library and NVML
#                                       missing (only the steps that need them skipped),
#                                       with no driver, and with no xz program.
#
# Each case prints one line; the first failure ends the script with exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The runs' rerun cache, here rather than in /tmp, and gone with the rest.
export CANDLE_LAB_RUN_CACHE=$tmp/cache
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

# steps_of SUMMARY: the step column of summary.md's steps table, one a line.
steps_of() { awk -F' [|] ' '/^[|] step [|]/ { on = 1; next } on && /^[|] / { sub(/^[|] /, "", $1); if ($1 != "---") print $1; next } on { exit }' "$1"; }

# plan_steps MODE: the plan's step names in their order (the GPU's; under cpu,
# the CPU's, whose sizes differ and which has no nvidia-smi).
plan_steps() {
  local size=8192
  [[ $1 == cpu ]] && size=192
  sed -n '/^PLAN=/,/^END_OF_PLAN$/p' scripts/gpu-run.sh | sed '1d;$d' |
    awk -v s="$size" -v m="$1" 'NF >= 5 { if (m == "cpu" && $5 == "-") next; n = $1; gsub(/SIZE/, s, n); print n }'
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

# The plan: both GPU calls fit their budgets, docs/gpu.md shows the plan the
# script prints, and a plan over budget is refused before anything is written.
plan_tests() {
  local plan rc=0
  plan=$(scripts/gpu-run.sh --plan) || fail "the committed plan does not fit: $(scripts/gpu-run.sh --plan 2>&1 >/dev/null)"
  grep -q "^| 1 | \*\*the call's budget\*\* | \*\*560\*\* |" <<<"$plan" || fail "the first call's budget is not 560 s: $(grep 'budget' <<<"$plan")"
  local docs
  docs=$(sed -n '/^<!-- the plan: scripts\/gpu-run.sh --plan -->$/,/^<!-- end of the plan -->$/p' docs/gpu.md | sed '1d;$d')
  [[ -n $docs ]] || fail "docs/gpu.md has no plan between its markers"
  [[ $docs == "$plan" ]] || fail "docs/gpu.md's plan is not the one scripts/gpu-run.sh --plan prints: $(diff <(echo "$docs") <(echo "$plan") | head -n 6 | tr '\n' ' ')"
  # Planted: generate's limit raised past what the first call can hold.
  cp scripts/gpu-run.sh "$tmp/over.sh"
  edit "$tmp/over.sh" '^generate                1  90 ' 'generate                1 200 '
  "$tmp/over.sh" --plan > /dev/null 2> "$tmp/over.txt" || rc=$?
  ((rc == 2)) || fail "a first call over budget: --plan exited $rc"
  grep -q "^error: the first call's plan needs 670 s (setup 30, limits 625, reserve 15), more than its budget of 560 s" "$tmp/over.txt" ||
    fail "no reason given: $(cat "$tmp/over.txt")"
  # A program step under 15 s is refused too.
  cp scripts/gpu-run.sh "$tmp/short.sh"
  edit "$tmp/short.sh" '^basics                  2  15 ' 'basics                  2   5 '
  rc=0
  "$tmp/short.sh" --plan > /dev/null 2> "$tmp/short.txt" || rc=$?
  ((rc == 2)) || fail "a 5 s program step: exit $rc"
  grep -q "^error: basics's limit of 5 s is under the 15 s" "$tmp/short.txt" || fail "a 5 s program step: $(cat "$tmp/short.txt")"
  # A run whose plan does not fit its budget does not start: OUT_DIR not made.
  rc=0
  CANDLE_LAB_RUN_BUDGET_S=100 scripts/gpu-run.sh --cpu "$tmp/over-run" "$1" > /dev/null 2> "$tmp/over-run.txt" || rc=$?
  ((rc == 2)) || fail "a run over its budget exited $rc"
  [[ ! -e $tmp/over-run ]] || fail "a run over its budget made OUT_DIR"
  grep -q '^error: the plan needs [0-9]* s, more than the budget of 100 s' "$tmp/over-run.txt" || fail "no reason given: $(tail -n 1 "$tmp/over-run.txt")"
  pass "the plan: the first call needs 560 s of its 560, docs/gpu.md's timeline is the plan printed, a plan over budget is refused"
}

cpu_tests() {
  local bundle=.gpu-bundle/candle-lab-cpu.tar.xz
  [[ -f $bundle ]] || fail "no $bundle: run just pack-cpu"
  plan_tests "$bundle"

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
  # The steps ran in the plan's order, the plan printed before step 1.
  [[ $(steps_of "$tmp/run/summary.md") == "$(plan_steps cpu)" ]] ||
    fail "the steps did not run in the plan's order: $(diff <(steps_of "$tmp/run/summary.md") <(plan_steps cpu) | head -n 4 | tr '\n' ' ')"
  local first
  first=$(grep -n -m 1 '^=== ' "$tmp/run/run.log" | cut -d: -f1)
  (($(grep -n -m 1 '^plan: [0-9]* steps: setup 30 s + limits [0-9]* s + reserve 15 s = [0-9]* s' "$tmp/run/run.log" | cut -d: -f1) < first)) ||
    fail "the plan is not printed before step 1"
  # The block's rows in summary.md hold their figures (median ms, GFLOP/s, peak MiB).
  local figures='[0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \| [0-9]+\.[0-9]+ \| ok \|$' phase
  for phase in prefill decode; do
    grep -Eq "^\| block\.json \| block\.phases\.$phase\.rows \| fp32 \| $figures" "$tmp/run/summary.md" ||
      fail "summary.md's $phase block row has no figures: $(grep "^| block.json | block.phases.$phase" "$tmp/run/summary.md" | head -n 1)"
  done
  grep -q '^  MemTotal:' "$tmp/run/run.log" || fail "run.log does not show /proc/meminfo"
  tail -n 1 "$tmp/run/run.log" | grep -qx 'every step passed' || fail "run.log does not end with the verdict"
  grep -q "^bundle: $moved/.gpu-bundle/" "$tmp/run/run.log" || fail "the run did not use the moved copy's bundle"
  grep -q "^bundle: unpacked and checked into $CANDLE_LAB_RUN_CACHE/bundle-cpu-" "$tmp/run/run.log" || fail "the bundle was not unpacked into the rerun cache"
  pass "a whole CPU run from another path, the building checkout hidden: $(grep -c '^| [a-z]' "$tmp/run/summary.md") rows in summary.md, in the plan's order, the log whole"

  # 1b. A rerun finds the unpacked bundle and does not unpack it again; its plan
  # counts the shorter setup.
  CANDLE_LAB_STEPS='^(basics|precision)$' scripts/gpu-run.sh --cpu "$tmp/rerun" > /dev/null 2>&1 || fail "the rerun of two steps failed"
  grep -q "^bundle: reusing $CANDLE_LAB_RUN_CACHE/bundle-cpu-[0-9a-f]*, unpacked and checked by an earlier run" "$tmp/rerun/run.log" ||
    fail "the rerun did not reuse the unpacked bundle: $(grep '^bundle' "$tmp/rerun/run.log" | head -n 1)"
  grep -q '^plan: 2 steps: setup 10 s + limits 60 s + reserve 15 s = 85 s' "$tmp/rerun/run.log" || fail "the rerun's plan: $(grep '^plan: [0-9]' "$tmp/rerun/run.log")"
  pass "a rerun reuses the unpacked bundle (setup allowance 10 s), and says so"

  # 2. A hang costs its step only: basics replaced by a program that never
  # ends; under 10-second limits the run ends, fails, names it, keeps the rest.
  unpack_bundle $bundle "$tmp/hang"
  cp "$tmp/hang/experiments/precision" "$tmp/precision.real" # for the missing library (6)
  printf '#!/bin/sh\nexec sleep 600.5\n' > "$tmp/hang/experiments/basics"
  # precision ignores SIGTERM: the kill comes 10 s after its limit.
  printf '#!/bin/sh\ntrap "" TERM\nexec sleep 601.5\n' > "$tmp/hang/experiments/precision"
  repack "$tmp/hang" "$tmp/hang.tar"
  if CANDLE_LAB_STEPS='^(cpu_vs_gpu|basics|sweep)$' CANDLE_LAB_STEP_TIMEOUT_S=10 scripts/gpu-run.sh --cpu "$tmp/short" "$tmp/hang.tar" > /dev/null; then
    fail "a run with a hanging step passed"
  fi
  grep -q '^| basics | 124 | .* | timed out after 10 s |' "$tmp/short/summary.md" || fail "the hang is not named"
  grep -q '^| cpu_vs_gpu | 0 |' "$tmp/short/summary.md" || fail "the step before the hang did not pass"
  grep -q '^| sweep | 0 |' "$tmp/short/summary.md" || fail "the step after the hang did not run"
  grep -q 'failed: basics (exit 124)$' "$tmp/short/summary.md" || fail "no verdict naming the hang"
  assert_files "$tmp/short"
  pass "a hanging program loses its step only"

  # 2b. Steps that outlive their limits (they ignore SIGTERM, so each is killed
  # 10 s later) eat into the budget; the next step does not start with less
  # left than it needs (its limit, under 30 s): it is listed as skipped, with
  # the reason. Two overruns, not one: a single overrun of 10 s ties with the
  # 10 s the setup's allowance gives back when the setup takes next to none,
  # and the outcome then hung on a second. Limits capped at 15 s, the bundle
  # unpacked beforehand (the reused allowance): the plan needs 10 + 3 x 15 +
  # 15 = 70 s, the two overruns leave at most 5 s for sweep.
  local rc=0
  cp "$tmp/hang/experiments/cpu_vs_gpu" "$tmp/cpu_vs_gpu.real"
  cp "$tmp/hang/experiments/precision" "$tmp/hang/experiments/cpu_vs_gpu"
  repack "$tmp/hang" "$tmp/hang2.tar"
  cp "$tmp/cpu_vs_gpu.real" "$tmp/hang/experiments/cpu_vs_gpu"
  CANDLE_LAB_STEPS='^sweep$' scripts/gpu-run.sh --cpu "$tmp/seed" "$tmp/hang2.tar" > /dev/null || fail "the run that unpacks the overrun's bundle failed"
  CANDLE_LAB_STEPS='^(cpu_vs_gpu|precision|sweep)$' CANDLE_LAB_STEP_TIMEOUT_S=15 scripts/gpu-run.sh --cpu "$tmp/overrun" "$tmp/hang2.tar" > /dev/null || rc=$?
  ((rc == 1)) || fail "a run with steps past their limits exited $rc"
  for s in cpu_vs_gpu precision; do
    grep -q "^| $s | 137 | 2[0-9]\.[0-9] | timed out after 15 s |" "$tmp/overrun/summary.md" || fail "the overrun of $s is not shown: $(grep "^| $s" "$tmp/overrun/summary.md")"
  done
  grep -Eq '^\| sweep \| - \| 0 \| skipped: [0-9]+ s of the budget left \(a step needs 15\) \|' "$tmp/overrun/summary.md" ||
    fail "sweep was not skipped for want of 15 s: $(grep '^| sweep' "$tmp/overrun/summary.md")"
  grep -q '^=== sweep: skipped, [0-9]* s of the budget left, under the 15 s a step needs to start' "$tmp/overrun/run.log" || fail "the log does not say why sweep was skipped"
  pass "no step starts with less of the budget left than it needs: it is listed as skipped, with the reason"

  # 3. SIGTERM to the script, and Ctrl-C (SIGINT to its process group, as a
  # terminal sends it): the step and its processes stop, no other step runs, the
  # summary is written. The hanging program is matmul, the run's first step.
  cp "$tmp/hang/experiments/basics" "$tmp/hang/experiments/matmul"
  repack "$tmp/hang" "$tmp/hang.tar"
  local sig
  for sig in TERM INT; do
    local dir=$tmp/sig-$sig
    # Its own session, SIGINT at its default (a background job's is ignored).
    setsid env --default-signal=INT scripts/gpu-run.sh --cpu "$dir" "$tmp/hang.tar" > /dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 600); do
      grep -q '^=== matmul (timeout' "$dir/run.log" 2>/dev/null && break
      sleep 0.1
    done
    grep -q '^=== matmul (timeout' "$dir/run.log" || fail "the hang step did not start in a minute"
    sleep 0.5
    if [[ $sig == TERM ]]; then kill -TERM "$pid"; else kill -INT -- "-$pid"; fi
    local t0=$SECONDS
    rc=0
    wait "$pid" || rc=$?
    local want=130
    [[ $sig == INT ]] || want=143
    ((rc == want)) || fail "SIG$sig: exit $rc, not $want"
    ((SECONDS - t0 < 30)) || fail "SIG$sig: the run took $((SECONDS - t0)) s to stop"
    pgrep -f 'sleep 600.5' > /dev/null && fail "SIG$sig: the hanging step's process is still running"
    assert_files "$dir"
    grep -q "^\*\*Stopped: interrupted by SIG$sig" "$dir/summary.md" || fail "SIG$sig: summary.md does not say so"
    grep -q '^| matmul-192 | - | 0 | not run: interrupted' "$dir/summary.md" || fail "SIG$sig: a step ran after it"
    grep -q "^interrupted by SIG$sig" "$dir/run.log" || grep -q "stopped: interrupted by SIG$sig" "$dir/run.log" ||
      fail "SIG$sig: run.log lost its last lines"
  done
  pass "SIGTERM and Ctrl-C stop the step and the run (143, 130), with the summary"

  # 4. An earlier run is never touched, and a mistyped bundle changes nothing.
  local before
  before=$(cd "$tmp/run" && sha256sum ./*)
  rc=0
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
  rc=0
  CANDLE_LAB_STEPS='^no-such-step$' scripts/gpu-run.sh --cpu "$tmp/new" > "$tmp/refused.txt" 2>&1 || rc=$?
  ((rc == 2)) || fail "CANDLE_LAB_STEPS matching no step: exit $rc"
  [[ ! -e $tmp/new ]] || fail "CANDLE_LAB_STEPS matching no step: OUT_DIR was made"
  grep -q "^error: CANDLE_LAB_STEPS '^no-such-step\$' selects none of the plan's steps" "$tmp/refused.txt" || fail "no reason given: $(cat "$tmp/refused.txt")"
  pass "an OUT_DIR with files is refused untouched; a missing bundle, a bad CANDLE_LAB_STEPS or one that selects nothing creates nothing"

  # 5. A truncated bundle stops the run before any step, with a summary saying so.
  head -c "$(($(stat -c %s $bundle) / 2))" $bundle > "$tmp/truncated.tar.xz"
  rc=0
  scripts/gpu-run.sh --cpu "$tmp/trunc" "$tmp/truncated.tar.xz" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a truncated bundle exited $rc"
  assert_files "$tmp/trunc"
  grep -q '^\*\*Stopped: cannot unpack' "$tmp/trunc/summary.md" || fail "summary.md: $(head -n 5 "$tmp/trunc/summary.md")"
  if compgen -G "$CANDLE_LAB_RUN_CACHE/.partial-*" > /dev/null; then
    fail "the failed unpack left files in the cache: $(ls -A "$CANDLE_LAB_RUN_CACHE" | tr '\n' ' ')"
  fi
  pass "a truncated bundle: exit 1, summary says it cannot be unpacked, nothing half-unpacked kept"

  # 6. A planted missing library: precision asks for libplant.so.1, found
  # nowhere. The log names the gap; precision alone is skipped, the others run.
  # (The hang bundle's files, precision the real one with its NEEDED entry renamed.)
  mv "$tmp/hang" "$tmp/nolib"
  cp "$tmp/precision.real" "$tmp/nolib/experiments/precision"
  python3 - "$tmp/nolib/experiments/precision" <<'PY'
import sys
path = sys.argv[1]
data = open(path, "rb").read()
assert data.count(b"libgcc_s.so.1\0") == 1, "precision's NEEDED libgcc_s.so.1 is not where this test plants"
open(path, "wb").write(data.replace(b"libgcc_s.so.1\0", b"libplant.so.1\0"))
PY
  repack "$tmp/nolib" "$tmp/nolib.tar"
  rc=0
  CANDLE_LAB_STEPS='^(cpu_vs_gpu|precision|sweep)$' scripts/gpu-run.sh --cpu "$tmp/nolib-run" "$tmp/nolib.tar" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a missing library: exit $rc"
  grep -q '^library gap: libplant.so.1, asked for by experiments/precision, is in none of' "$tmp/nolib-run/run.log" || fail "the log does not name the gap"
  grep -q '^| precision | - | 0 | skipped: needs libplant.so.1 (not found) |' "$tmp/nolib-run/summary.md" || fail "precision was not skipped: $(grep '^| precision' "$tmp/nolib-run/summary.md")"
  grep -q '^| cpu_vs_gpu | 0 |' "$tmp/nolib-run/summary.md" || fail "cpu_vs_gpu, which does not need it, did not run"
  grep -q '^| sweep | 0 |' "$tmp/nolib-run/summary.md" || fail "sweep, which does not need it, did not run"
  grep -q 'failed: precision (exit -)$' "$tmp/nolib-run/summary.md" || fail "the verdict: $(grep 'failed' "$tmp/nolib-run/summary.md")"
  pass "a planted missing library: only the step of the program that needs it is skipped, the gap in the log"
}

# A stand-in for the GPU machine's driver folder (/usr/local/nvidia): bin/nvidia-smi
# answering as an H200's does, lib64/libcuda.so.1, the toolchain's link stub
# (every entry point returns CUDA_ERROR_STUB_LIBRARY: a dry run calls none, a run
# stops at its first device call), and lib64/libnvidia-ml.so.1, an empty library
# by the name the driver ships NVML under (found, never called here).
make_driver() {
  local d=$1
  mkdir -p "$d/bin" "$d/lib64"
  # shellcheck disable=SC1090
  source "$(scripts/cuda-toolchain.sh)"
  cp "$CUDA_HOME/lib/stubs/libcuda.so" "$d/lib64/libcuda.so.1"
  echo 'int candle_lab_nvml_stand_in;' > "$tmp/nvml.c"
  gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o "$d/lib64/libnvidia-ml.so.1" "$tmp/nvml.c"
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
  libs=$(sed -n 's|^driver: \(.*\)/libcuda.so.1 .*|\1|p; s|^library: [^ ]* from ||p' "$log" | sort -u | tr '\n' ':')
  [[ $libs == *cu13/lib:* ]] || fail "$log names no CUDA library folder: the programs' --help would not start"
  while IFS= read -r line; do
    name=${line#=== } && name=${name%% (timeout*}
    [[ $name != nvidia-smi ]] || continue # the stand-in driver's, on no PATH here
    read -ra words <<<"${line#*): }"
    case ${words[0]} in
      experiments/* | tools/* | tests/*) prog=("$dir/${words[0]}") ;;
      *)
        prog=("${words[0]}")
        if [[ ${words[1]:-} == pytorch/* ]]; then prog+=("$dir/${words[1]}"); fi
        ;;
    esac
    help=$(LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:-}" timeout 30 "${prog[@]}" --help 2>/dev/null) || true
    [[ -n $help ]] || fail "$name: ${prog[*]} --help printed nothing (could it start?)"
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
  local second
  second=$(scripts/gpu-run.sh --plan | sed -n "s/^The second call: CANDLE_LAB_STEPS='\(.*\)'$/\1/p")
  [[ -n $second ]] || fail "--plan does not name the second call"

  # 1. The rehearsal of each call passes, every step accepted, each found in the
  # bundle: the first call as the default run, the second as its CANDLE_LAB_STEPS.
  rehearse "$tmp/r" > "$tmp/r.txt" 2>&1 || {
    cat "$tmp/r.txt"
    fail "the rehearsal of the first call failed"
  }
  CANDLE_LAB_STEPS=$second rehearse "$tmp/r2" > "$tmp/r2.txt" 2>&1 || {
    cat "$tmp/r2.txt"
    fail "the rehearsal of the second call failed"
  }
  assert_files "$tmp/r"
  assert_files "$tmp/r2"
  local s=$tmp/r/summary.md
  grep -q '^# candle-lab rehearsal of the cuda run' "$s" || fail "summary.md does not say rehearsal"
  grep -q "^driver: $driver/lib64/libcuda.so.1 (not in the linker's cache" "$tmp/r/run.log" || fail "run.log does not say where the driver was"
  grep -q "^nvidia-smi: $driver/bin/nvidia-smi" "$tmp/r/run.log" || fail "nvidia-smi was not found in the driver folder"
  grep -q "^NVML: $driver/lib64/libnvidia-ml.so.1 (not in the linker's cache" "$tmp/r/run.log" || fail "NVML's libnvidia-ml.so.1 was not looked for by its name"
  local name call steps=() in_first in_second
  in_first=$(sed -n '/^| step | limit s |/,/^plan: [0-9]/p' "$tmp/r/run.log" | awk -F' [|] ' '/^[|] [a-z]/ { sub(/^[|] /, "", $1); if ($1 != "step") print $1 }')
  in_second=$(sed -n '/^| step | limit s |/,/^plan: [0-9]/p' "$tmp/r2/run.log" | awk -F' [|] ' '/^[|] [a-z]/ { sub(/^[|] /, "", $1); if ($1 != "step") print $1 }')
  [[ $in_first$'\n'$in_second == "$(plan_steps cuda)" ]] || fail "the two calls' plans are not the whole plan, in order"
  for name in $(tar -tJf $bundle | sed -n 's|^\./experiments/||p'); do steps+=("$name"); done
  for name in $(tar -tJf $bundle | sed -n 's|^\./tests/||p'); do steps+=("test-$name"); done
  steps+=(nvidia-smi matmul-8192 cpu_vs_gpu-8192 pytorch-matmul-8192 pytorch-block compare compare-block pytorch-kernels compare-kernels)
  for name in "${steps[@]}"; do
    if grep -qx "$name" <<<"$in_first"; then call=r; else call=r2; fi
    grep -q "^| $name | 0 | [0-9.]* | rehearsed: arguments accepted |" "$tmp/$call/summary.md" || fail "no rehearsed $name step in $call/summary.md"
  done
  grep -q '^| test-cli | - | 0 | in the second call (not counted' "$s" || fail "the first call does not list the second call's steps as such"
  grep -q "^plan: the second call runs the others: CANDLE_LAB_STEPS='$second'$" "$tmp/r/run.log" || fail "the first call's log does not name the second call"
  # The exact argument lists, as the GPU call runs them.
  grep -q '^=== matmul-8192 .*--device cuda --size 8192 --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced --no-cpu --output .* --skip-host-memory-check --dry-run$' "$tmp/r/run.log" ||
    fail "matmul-8192's argument list is not the GPU call's"
  # The CUDA tests that used to run nowhere are in the bundle's harnesses.
  local logs=$tmp/r-logs
  mkdir -p "$logs" && tar -xzf "$tmp/r2/results.tar.gz" -C "$logs"
  grep -q '^cuda::writes_json_csv_and_svg: test' "$logs/results/logs/test-sweep.log" || fail "the CUDA sweep test is not packed"
  grep -q '^memory_fields_cuda: test' "$logs/results/logs/test-memory_overhead.log" || fail "memory_fields_cuda is not packed"
  grep -q '^overhead_fields_cuda: test' "$logs/results/logs/test-memory_overhead.log" || fail "overhead_fields_cuda is not packed"
  grep -q '^cuda::summary_of_a_fresh_run: test' "$logs/results/logs/test-summary.log" || fail "the CUDA summary test is not packed"
  grep -q '^tiny_block_cuda: test' "$logs/results/logs/test-block.log" || fail "the CUDA block test is not packed"
  grep -q '^random_weights_run_at_the_tiny_shape_on_cuda: test' "$logs/results/logs/test-generate.log" ||
    fail "the CUDA generate test is not packed"
  grep -q '^a_run_killed_midway_keeps_its_finished_rows: test' "$logs/results/logs/test-generate.log" ||
    fail "the test of a killed generate is not packed"
  grep -q '^error::tests::candles_cublas_refusal_is_unsupported: test' "$logs/results/logs/test-candle_lab.log" ||
    fail "the CUDA test of cuBLAS's refusal is not packed"
  grep -q '_cuda: test' "$logs/results/logs/test-kernels.log" || fail "the CUDA kernels tests are not packed"
  # Each experiment's GPU-call preset, as its plan shows it: the block with the
  # suite's kernels timed beside candle-nn's, generate at a Llama-3.2-1B's shape.
  mkdir -p "$logs/1" && tar -xzf "$tmp/r/results.tar.gz" -C "$logs/1"
  grep -q '^=== block .*--preset gpu-call' "$tmp/r/run.log" || fail "block was not given its gpu-call preset"
  grep -q 'Both' "$logs/1/results/logs/block.log" || fail "the GPU call's block does not time both kernel sets"
  grep -q 'llama-3.2-1b\|Llama-3.2-1B' "$logs/1/results/logs/generate.log" || fail "the GPU call's generate is not at the 1B shape"
  pass "the rehearsal: ${#steps[@]} steps in two calls accepted their arguments; the driver and NVML found in a folder on neither path"

  # The GPU machine's memory grows on demand (issue 22, defect 1): every step
  # whose program's --help lists --skip-host-memory-check was given it, PyTorch's
  # too, and the log shows /proc/meminfo. Each program is asked here, apart
  # from gpu-run.sh's own reading of the same.
  local programs=$tmp/r-bundle
  mkdir -p "$programs" && tar -xJf $bundle -C "$programs"
  local missing
  missing=$(missing_host_flag "$tmp/r/run.log" "$programs"; missing_host_flag "$tmp/r2/run.log" "$programs")
  [[ -z $missing ]] || fail "steps not given --skip-host-memory-check though their program accepts it: $missing"
  local given
  given=$(cat "$tmp/r/run.log" "$tmp/r2/run.log" | grep -c '^=== .*--skip-host-memory-check')
  for name in block memory matmul-8192 pytorch-matmul-8192 pytorch-block; do
    grep -q "^=== $name (timeout.* --skip-host-memory-check" "$tmp/r/run.log" || fail "$name was not given --skip-host-memory-check"
  done
  grep -q "^=== sweep (timeout.* --skip-host-memory-check" "$tmp/r2/run.log" || fail "sweep was not given --skip-host-memory-check"
  grep -q '^  MemTotal:' "$tmp/r/run.log" || fail "run.log does not show /proc/meminfo"
  pass "the host check: $given steps given --skip-host-memory-check, every one whose program accepts it"

  # The comparisons come right after their runs (defect 3); the JIT cache in the
  # rerun folder (defect 4), which the second call finds.
  assert_compares_follow "$s" pytorch-matmul-8192
  grep -q "^CUDA JIT cache: $CANDLE_LAB_RUN_CACHE/cuda-cache (CUDA_CACHE_MAXSIZE=4294967296): empty" "$tmp/r/run.log" || fail "no CUDA JIT cache in the rerun folder"
  grep -q '^CUDA JIT cache at the end: [0-9]* files' "$tmp/r/run.log" || fail "the JIT cache's size at the end is not logged"
  grep -q "^bundle: reusing $CANDLE_LAB_RUN_CACHE/bundle-cuda-" "$tmp/r2/run.log" || fail "the second call unpacked the bundle again"
  pass "compares right after their runs; the second call reuses the first's unpacked bundle and JIT cache folder"

  # The host side, measured here (issue 32): every program step of the first
  # call timed up to its first device call, generate's weights and models within
  # what its limit assumes, the setup within its allowance.
  local hosts
  hosts=$(tar -xzOf "$tmp/r/results.tar.gz" results/host-side.tsv) || fail "no host-side.tsv in the archive"
  for name in matmul matmul-8192 pytorch-matmul-8192 block pytorch-block kernels pytorch-kernels generate memory overhead generate-prepare; do
    grep -q "^$name	[0-9.]*	" <<<"$hosts" || fail "no host-side time for $name"
  done
  grep -q '^generate	[0-9.]*	1	.*CUDA_ERROR_STUB_LIBRARY' <<<"$hosts" || fail "generate's host-side run did not stop at the stand-in driver: $(grep '^generate	' <<<"$hosts")"
  grep -q '^## Host side: each step on this CPU before its first device call' "$s" || fail "summary.md does not show the host side"
  # Times are logged, never asserted (the 2 cores here are shared): the line
  # must hold a measured number, which docs/gpu.md's arithmetic quotes.
  local took allowed
  read -r took allowed < <(sed -n 's/^host side of generate, its weights and models: \([0-9.]*\) s here (.*), of the \([0-9]*\) s its limit assumes$/\1 \2/p' "$tmp/r/run.log")
  [[ $took =~ ^[0-9]+\.[0-9]$ ]] || fail "generate's host side was not measured: $(grep 'host side of generate' "$tmp/r/run.log")"
  local setup_s setup_a
  read -r setup_s setup_a < <(sed -n 's/^setup: \([0-9]*\) s (unpack or reuse, checks, libraries) of its \([0-9]*\) s allowance$/\1 \2/p' "$tmp/r/run.log")
  [[ -n $setup_s ]] || fail "the setup's time is not logged"
  pass "the host side: generate's weights and models $took s here (its limit assumes $allowed), the setup $setup_s s (allowance $setup_a), each step's time before its device (host-side.tsv)"

  # 2. A refused flag planted in the plan fails the rehearsal, naming its step.
  # (The plan is the script's: a copy of it is planted and run on the same bundle.)
  cp scripts/gpu-run.sh "$tmp/planted-flag.sh"
  edit "$tmp/planted-flag.sh" 'bf16-reduced --no-cpu)$' 'bf16-reduced --no-cpu --bogus-flag)'
  local rc=0
  CANDLE_LAB_STEPS='^(matmul-8192|basics)$' CANDLE_LAB_DRIVER_ROOT=$driver PATH="$torch_bin:$PATH" "$tmp/planted-flag.sh" --rehearse "$tmp/p1" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a planted --bogus-flag: exit $rc"
  grep -q 'failed: matmul-8192 (exit 2)$' "$tmp/p1/summary.md" || fail "the planted flag's step is not named: $(grep failed "$tmp/p1/summary.md")"
  grep -q 'unexpected argument .--bogus-flag' "$tmp/p1/run.log" || fail "the log does not show the refusal"
  pass "a planted refused flag fails the rehearsal, naming matmul-8192"

  # 3. Defect 1 re-planted: PyTorch given matmul's precisions, bf16-reduced with them.
  cp scripts/gpu-run.sh "$tmp/planted-dtype.sh"
  edit "$tmp/planted-dtype.sh" 'pytorch_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16 ' \
    'pytorch_args=(--size "$size" --iters 20 --warmup 5 --dtypes fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced '
  rc=0
  CANDLE_LAB_STEPS='^pytorch-matmul-8192$' CANDLE_LAB_DRIVER_ROOT=$driver PATH="$torch_bin:$PATH" "$tmp/planted-dtype.sh" --rehearse "$tmp/p2" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "PyTorch with bf16-reduced: exit $rc"
  grep -q 'failed: pytorch-matmul-8192 (exit 2)$' "$tmp/p2/summary.md" || fail "the PyTorch step is not named"
  pass "PyTorch given bf16-reduced (defect 1) fails the rehearsal, naming pytorch-matmul-8192"

  # 3b. The host flag withheld: the check above names the steps. A few steps
  # only (CANDLE_LAB_STEPS, as a rerun selects them, from both calls); the others
  # not counted.
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

  # 3c. A CUDA library and NVML missing: torch's NVIDIA wheels without curand,
  # and no libnvidia-ml.so.1 in the driver folder. Every nvidia/*/lib folder is
  # searched (cuBLAS here lives in a folder of its own); the gaps are logged, the
  # programs that need curand are skipped, and the steps that do not (nvidia-smi,
  # PyTorch's) still run.
  local wheels=$tmp/wheels real_lib
  real_lib=$("$torch_bin/python3" -c 'import nvidia, os; print(next(os.path.join(p, "cu13", "lib") for p in nvidia.__path__ if os.path.isdir(os.path.join(p, "cu13", "lib"))))')
  mkdir -p "$wheels/nvidia/cu13/lib" "$wheels/nvidia/cublas/lib"
  for f in "$real_lib"/*; do
    case $(basename "$f") in
      libcurand.so*) ;;
      libcublas*) ln -s "$f" "$wheels/nvidia/cublas/lib/" ;;
      *) ln -s "$f" "$wheels/nvidia/cu13/lib/" ;;
    esac
  done
  # A python whose NVIDIA wheels are those folders: the script asks python for
  # its nvidia/*/lib folders with a program on standard input ("-"); everything
  # else is torch's python.
  cat > "$tmp/fake-python" <<PY
#!/usr/bin/env bash
if [[ \${1:-} == - ]]; then printf '%s\n' "$wheels/nvidia/cu13/lib" "$wheels/nvidia/cublas/lib"; exit 0; fi
exec "$torch_bin/python3" "\$@"
PY
  chmod +x "$tmp/fake-python"
  local nonvml=$tmp/nvidia-no-nvml
  cp -r "$driver" "$nonvml" && rm "$nonvml/lib64/libnvidia-ml.so.1"
  rc=0
  CANDLE_LAB_STEPS='^(nvidia-smi|matmul|pytorch-matmul-8192|basics)$' CANDLE_LAB_PYTHON=$tmp/fake-python CANDLE_LAB_DRIVER_ROOT=$nonvml \
    PATH="$torch_bin:$PATH" scripts/gpu-run.sh --rehearse "$tmp/p4" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "a missing CUDA library: exit $rc"
  grep -q "^library: libcublas.so.13 from $wheels/nvidia/cublas/lib" "$tmp/p4/run.log" || fail "cuBLAS was not found in its own nvidia/*/lib folder"
  grep -q '^library gap: libcurand.so.10, asked for by .*experiments/matmul.*, is in none of: ' "$tmp/p4/run.log" || fail "the curand gap is not logged: $(grep 'library' "$tmp/p4/run.log" | head -n 3)"
  grep -q "^library gap: NVML's libnvidia-ml.so.1 is in neither the linker's cache nor" "$tmp/p4/run.log" || fail "the NVML gap is not logged"
  for name in matmul basics; do
    grep -q "^| $name | - | 0 | skipped: needs libcurand.so.10 (not found) |" "$tmp/p4/summary.md" || fail "$name was not skipped: $(grep "^| $name " "$tmp/p4/summary.md")"
  done
  for name in nvidia-smi pytorch-matmul-8192; do
    grep -q "^| $name | 0 | .* | rehearsed: arguments accepted |" "$tmp/p4/summary.md" || fail "$name, which needs no curand, did not run"
  done
  pass "a missing CUDA library and NVML: the gaps logged, only the steps that need curand skipped"

  # 4. No driver anywhere: the run stops before any step, and says where it looked.
  rc=0
  CANDLE_LAB_DRIVER_ROOT=$tmp/no-driver PATH="$torch_bin:$PATH" scripts/gpu-run.sh --rehearse "$tmp/nd" > /dev/null 2>&1 || rc=$?
  ((rc == 1)) || fail "no driver: exit $rc"
  assert_files "$tmp/nd"
  grep -q "^\*\*Stopped: libcuda.so.1 (the NVIDIA driver) is in neither the linker's cache" "$tmp/nd/summary.md" ||
    fail "no driver: summary.md says $(sed -n 3p "$tmp/nd/summary.md")"
  pass "no driver: exit 1, summary says where it looked"

  # 5. A machine without the xz program: python3 unpacks the bundle (into a
  # cache of its own: the shared one holds it unpacked already).
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
  CANDLE_LAB_RUN_CACHE=$tmp/cache-noxz CANDLE_LAB_STEPS='^(matmul|test-alloc_peak)$' CANDLE_LAB_PYTHON=$torch_bin/python3 \
    CANDLE_LAB_DRIVER_ROOT=$driver PATH=$shim scripts/gpu-run.sh --rehearse "$tmp/noxz" > /dev/null 2>&1 || {
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
  plan) plan_tests .gpu-bundle/candle-lab-cpu.tar.xz ;;
  *) echo "usage: scripts/test-gpu-run.sh cpu | rehearsal | plan" >&2 && exit 2 ;;
esac
