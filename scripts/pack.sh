#!/usr/bin/env bash
# Packs what scripts/gpu-run.sh runs into one archive, built here with cargo
# for a machine that has no cargo:
#
#   scripts/pack.sh cuda [CAP]   .gpu-bundle/candle-lab-cuda.tar.xz: release build
#                                with --features cuda, Candle's kernels compiled for
#                                compute capability CAP (default 90: sm_90a)
#   scripts/pack.sh cpu          .gpu-bundle/candle-lab-cpu.tar.xz: the same layout
#                                without CUDA, for `gpu-run.sh --cpu` in CI
#   scripts/pack.sh check FILE   checks a packed archive (run by the two above)
#
# Layout (nothing else is packed; `check` enforces it):
#   BUNDLE             kind=cuda|cpu, compute_cap, git commit
#   experiments/NAME   every [[bin]] whose source is under experiments/ (cargo metadata)
#   tools/NAME         every [[bin]] whose source is under tools/
#   tests/NAME         every test harness `cargo test` builds (profile.test), by target name
#   scripts/           gpu-run.sh and summary.py
#   pytorch/           *.py and requirements*.txt, when the folder exists
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
  [[ -f $dir/BUNDLE && -x $dir/scripts/gpu-run.sh && -f $dir/scripts/summary.py ]] || {
    log "check: BUNDLE, scripts/gpu-run.sh or scripts/summary.py is missing"
    bad=1
  }
  (cd "$dir" && find . -type f -printf '%s\t%P\n' | sort -k2 |
    awk -F'\t' '{ printf "  %8.1f MiB  %s\n", $1 / 1048576, $2; total += $1 }
                END { printf "  %8.1f MiB  unpacked, in all\n", total / 1048576 }') >&2
  log "$(du -h "$archive" | cut -f1) $archive ($(tar -tJf "$archive" | grep -vc '/$') files)"
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
  local target
  target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  stage=$(mktemp -d) # global: the EXIT trap reads it after pack returns
  trap 'rm -rf "$stage"' EXIT

  log "building release programs ($kind${cap:+, compute capability $cap})"
  cargo build --release "${features[@]}" --bins
  mkdir -p "$stage/experiments" "$stage/tools" "$stage/tests" "$stage/scripts"
  for folder in experiments tools; do
    for name in $(bins_under "$folder"); do
      cp "$target/release/$name" "$stage/$folder/"
    done
  done

  # Only real test artifacts (`--no-run` also builds and reports the programs
  # that integration tests run, with profile.test false), and only the harnesses
  # that run from a bundle: the library's unit tests (with their CUDA variants;
  # they read results/ relative to the folder they run in, the repository root),
  # the CLI tests (programs from CANDLE_LAB_BIN_DIR), the pool and allocator
  # tests. The others find programs and files through paths of the build machine.
  log "building release test harnesses"
  cargo test --release "${features[@]}" --lib --test cli --test cuda_pool --test alloc_peak \
    --no-run --message-format=json |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable"):
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do cp "$exe" "$stage/tests/$name"; done

  cp scripts/gpu-run.sh scripts/summary.py "$stage/scripts/"
  if [[ -d pytorch ]]; then
    mkdir -p "$stage/pytorch"
    find pytorch -maxdepth 1 \( -name '*.py' -o -name 'requirements*.txt' \) -exec cp {} "$stage/pytorch/" \;
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
    [[ -z $cap ]] || echo "compute_cap=$cap"
    [[ -z $arch ]] || echo "arch=$arch"
    echo "commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"
  } > "$stage/BUNDLE"

  mkdir -p "$(dirname "$archive")"
  tar -cf - -C "$stage" . | xz -T0 -6 > "$archive.tmp"
  mv "$archive.tmp" "$archive"
  check "$archive"
}

case ${1:-} in
  cuda) pack cuda "${2:-90}" ;;
  cpu) pack cpu ;;
  check) check "${2:?usage: scripts/pack.sh check ARCHIVE}" ;;
  *) echo "usage: scripts/pack.sh cuda [CAP] | cpu | check ARCHIVE" >&2; exit 2 ;;
esac
