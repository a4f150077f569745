#!/usr/bin/env bash
# Packs what scripts/gpu-run.sh runs into one archive, built here with cargo
# for a machine that has no cargo:
#
#   scripts/pack.sh cuda [CAP]   .gpu-bundle/candle-lab-cuda.tar.xz: release build
#                                with --features cuda, Candle's kernels compiled for
#                                compute capability CAP (default 90: sm_90a)
#   scripts/pack.sh cpu          .gpu-bundle/candle-lab-cpu.tar.xz: the same layout,
#                                dev build without CUDA, for `gpu-run.sh --cpu` in CI
#   scripts/pack.sh check FILE   checks a packed archive (run by the two above)
#
# Layout (nothing else is packed; `check` enforces it):
#   BUNDLE             kind=cuda|cpu, profile=release|dev, compute_cap, git commit
#   experiments/NAME   every [[bin]] whose source is under experiments/ (cargo metadata)
#   tools/NAME         every [[bin]] whose source is under tools/
#   tests/NAME         every test harness `cargo test` builds (profile.test), by target name
#   scripts/           gpu-run.sh, summary.py and pytorch-env.sh (which python runs PyTorch)
#   SHA256SUMS         every file's checksum, which gpu-run.sh checks after unpacking
#   pytorch/           the twins' packages (*/*.py) and requirements*.txt, when the folder exists
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "pack: $*" >&2; }

# "experiments" or "tools": the names of the package's binaries whose source is
# in that folder, from cargo metadata (never a hand-kept list).
bins_under() {
  cargo metadata --format-version 1 --no-deps | python3 -c '
import json, os, sys
meta = json.load(sys.stdin)
folder = sys.argv[1]
for pkg in meta["packages"]:
    root = os.path.dirname(pkg["manifest_path"])
    for t in pkg["targets"]:
        rel = os.path.relpath(t["src_path"], root)
        if "bin" in t["kind"] and rel.split(os.sep)[0] == folder:
            print(t["name"])
' "$1" | sort
}

# Checks an archive: exactly the programs cargo metadata lists, test harnesses
# only under tests/ (libtest's RUST_TEST_THREADS is in every harness and in no
# program), no file packed twice, and the sizes.
check() {
  local archive=$1 dir bad=0
  dir=$(mktemp -d)
  tar -xJf "$archive" -C "$dir"
  for folder in experiments tools; do
    local want have
    want=$(bins_under "$folder" | tr '\n' ' ')
    have=$( (cd "$dir" && [[ -d $folder ]] && ls "$folder") | sort | tr '\n' ' ' || true)
    if [[ $want != "$have" ]]; then
      log "check: $folder/ holds '$have', cargo metadata lists '$want'"
      bad=1
    fi
  done
  for f in "$dir"/experiments/* "$dir"/tools/*; do
    [[ -e $f ]] || continue
    if grep -q -a RUST_TEST_THREADS "$f"; then
      log "check: ${f#"$dir"/} is a test harness, not a program"
      bad=1
    fi
  done
  local tests=0
  for f in "$dir"/tests/*; do
    [[ -e $f ]] || continue
    tests=$((tests + 1))
    if ! grep -q -a RUST_TEST_THREADS "$f"; then
      log "check: ${f#"$dir"/} is not a test harness (a program packed as a test?)"
      bad=1
    fi
  done
  ((tests > 0)) || { log "check: no test harness under tests/"; bad=1; }
  local dups
  dups=$(cd "$dir" && find . -type f -exec sha256sum {} + | sort | uniq -w 64 -D | awk '{print $2}')
  if [[ -n $dups ]]; then
    log "check: the same file is packed more than once: $(echo "$dups" | tr '\n' ' ')"
    bad=1
  fi
  [[ -f $dir/BUNDLE && -x $dir/scripts/gpu-run.sh && -f $dir/scripts/summary.py && -x $dir/scripts/pytorch-env.sh ]] || {
    log "check: BUNDLE, scripts/gpu-run.sh, scripts/summary.py or scripts/pytorch-env.sh is missing"
    bad=1
  }
  if ! (cd "$dir" && sha256sum --quiet -c SHA256SUMS >&2); then
    log "check: the files do not match SHA256SUMS"
    bad=1
  fi
  (cd "$dir" && find . -type f -printf '%s\t%P\n' | sort -k2 |
    awk -F'\t' '{ printf "  %8.1f MiB  %s\n", $1 / 1048576, $2; total += $1 }
                END { printf "  %8.1f MiB  unpacked, in all\n", total / 1048576 }') >&2
  log "$(du -h "$archive" | cut -f1) $archive ($(tar -tJf "$archive" | grep -vc '/$') files)"
  # The device tool carries at most 64 MiB to the GPU machine: the working tree
  # (its tracked files) and the CUDA bundle, with 1 MiB to spare. The CPU bundle
  # (the dev build, for CI) never travels, so it has no such limit.
  local bytes tree room
  bytes=$(stat -c %s "$archive")
  if [[ $archive == *-cuda.tar.xz ]]; then
    tree=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{ t += $1 } END { print t + 0 }')
    room=$((63 * 1048576 - tree))
    if ((bytes > room)); then
      log "check: $archive is $((bytes / 1048576)) MiB; with the tree's $((tree / 1048576)) MiB it passes the 64 MiB the GPU machine's carry takes"
      bad=1
    fi
  fi
  local programs
  programs=$(find "$dir/experiments" "$dir/tools" -type f 2>/dev/null | wc -l)
  rm -rf "$dir"
  ((bad == 0)) || { log "check FAILED: $archive"; return 1; }
  log "check passed: $programs programs, $tests test harnesses, nothing packed twice"
}

pack() {
  local kind=$1 cap=${2:-} features=() archive
  if [[ $kind == cuda ]]; then
    [[ $cap =~ ^[0-9]+$ ]] || { log "compute capability '$cap' is not a number like 90 or 89"; exit 2; }
    export CUDA_COMPUTE_CAP=$cap
    # shellcheck disable=SC1090
    source "$(scripts/cuda-toolchain.sh)"
    features=(--features cuda)
  fi
  archive=.gpu-bundle/candle-lab-$kind.tar.xz
  stage=$(mktemp -d) # global: the EXIT trap reads it after pack returns
  trap 'rm -rf "$stage"' EXIT

  # One cargo call builds both the programs and the test harnesses, so they come
  # from one build graph: `cargo test --no-run` also builds every program (the
  # CLI tests run them) and reports each as an artifact with profile.test false.
  # The harnesses packed are the ones that run from a bundle: the library's unit
  # tests, and every integration test with a CUDA variant (programs from
  # CANDLE_LAB_BIN_DIR; files relative to the folder they run in, the repository
  # root). The others are CPU-only, or find files through the build machine's paths.
  # The CUDA bundle is what a GPU measures: release. The CPU bundle only checks
  # gpu-run.sh's logic at small sizes, so it is the dev build that `just test`
  # has already made (nothing compiles twice in CI).
  local profile=dev
  if [[ $kind == cuda ]]; then profile=release; fi
  log "building programs and test harnesses ($profile, $kind${cap:+, compute capability $cap})"
  # The integration tests with a CUDA variant are found by it (a test file that
  # names the cuda feature), so a new one is packed without a list here; the
  # counting allocator's own test too (it checks the allocator any run uses).
  local harnesses=(--lib --test alloc_peak) t
  for t in tests/*.rs; do
    if grep -q 'feature = "cuda"' "$t"; then harnesses+=(--test "$(basename "$t" .rs)"); fi
  done
  cargo test --profile "$profile" "${features[@]}" "${harnesses[@]}" --no-run --message-format=json > "$stage/artifacts.json"
  mkdir -p "$stage/experiments" "$stage/tools" "$stage/tests" "$stage/scripts"
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        what = "test" if m["profile"]["test"] else "bin" if "bin" in m["target"]["kind"] else ""
        if what:
            print(what, m["target"]["name"], m["executable"])
' "$stage/artifacts.json" > "$stage/artifacts.txt"
  rm "$stage/artifacts.json"
  local what name exe
  while read -r what name exe; do
    if [[ $what == test ]]; then cp "$exe" "$stage/tests/$name"; fi
  done < "$stage/artifacts.txt"
  for folder in experiments tools; do
    for name in $(bins_under "$folder"); do
      exe=$(awk -v n="$name" '$1 == "bin" && $2 == n { print $3 }' "$stage/artifacts.txt")
      [[ -n $exe ]] || { log "cargo built no program named $name"; exit 1; }
      cp "$exe" "$stage/$folder/"
    done
  done
  rm "$stage/artifacts.txt"
  # Debug info is for the build machine: a dev program carries ~50 MB of it.
  # Symbols stay, so a backtrace still names its functions.
  strip --strip-debug "$stage"/experiments/* "$stage"/tools/* "$stage"/tests/*

  cp scripts/gpu-run.sh scripts/summary.py scripts/pytorch-env.sh "$stage/scripts/"
  if [[ -d pytorch ]]; then
    mkdir -p "$stage/pytorch"
    # The twins' packages (common/, matmul/, block/, ...: each run as `python
    # pytorch/NAME`) and the requirements, without the tests' caches.
    (cd pytorch && find . \( -name '*.py' -o -name 'requirements*.txt' \) -not -path '*/__pycache__/*' \
      -exec cp --parents {} "$stage/pytorch/" \;)
  fi
  local arch=""
  if [[ $kind == cuda ]]; then
    # cudaforge (Candle's kernel builder) adds "a" from 90 to 120 ("f" above):
    # sm_90a PTX loads on compute capability 9.0 only, while PTX for a plain
    # sm_80 or sm_89 also JIT-compiles on every newer GPU.
    arch=sm_$cap
    if ((cap > 120)); then arch=${arch}f; elif ((cap >= 90)); then arch=${arch}a; fi
  fi
  {
    echo "kind=$kind"
    echo "profile=$profile" # a dev build's times are not the suite's speed
    [[ -z $cap ]] || echo "compute_cap=$cap"
    [[ -z $arch ]] || echo "arch=$arch"
    echo "commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"
  } > "$stage/BUNDLE"
  local sums
  sums=$(cd "$stage" && find . -type f -printf '%P\n' | sort | xargs -d '\n' sha256sum)
  echo "$sums" > "$stage/SHA256SUMS"

  mkdir -p "$(dirname "$archive")"
  # Every CUDA program carries the same ~35 MB of Candle's kernels. A 256 MiB
  # window reaches back across whole files, so xz stores them once: ~1 GiB of
  # CUDA programs and tests pack into ~27 MB (with -6's 8 MiB window, 548 MiB of
  # them made 74 MB: over the 64 MiB the GPU machine's carry takes). One thread: xz's
  # threads split the input into blocks, and a block cannot see the one before.
  # The CPU bundle never travels (CI unpacks it where it was made): the fastest
  # preset on every core, 55 s where the CUDA bundle's settings take 150 s for
  # its 740 MB (measured on this 2-core VM), at 150 MB instead of 64 MB.
  local xz_opts=(-T1 "--lzma2=preset=2,dict=256MiB")
  if [[ $kind == cpu ]]; then xz_opts=(-T0 -0); fi
  tar -cf - -C "$stage" . | xz "${xz_opts[@]}" > "$archive.tmp"
  mv "$archive.tmp" "$archive"
  check "$archive"
}

case ${1:-} in
  cuda) pack cuda "${2:-90}" ;;
  cpu) pack cpu ;;
  check) check "${2:?usage: scripts/pack.sh check ARCHIVE}" ;;
  *) echo "usage: scripts/pack.sh cuda [CAP] | cpu | check ARCHIVE" >&2; exit 2 ;;
esac
