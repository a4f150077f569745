#!/usr/bin/env bash
# Prints the Python interpreter that runs pytorch/ (the PyTorch reference):
#   1. $CANDLE_LAB_PYTHON when set;
#   2. else the system python3 when `import torch` works there (the GPU machine has
#      torch for CUDA 13);
#   3. else a venv with pytorch/requirements.txt, made once under
#      ${XDG_CACHE_HOME:-~/.cache}/candle-lab/venv-<hash> (the hash covers the
#      requirements and the Python version, so a change makes a new one). The first
#      time downloads about 2.1 GB of wheels from PyPI (torch and the CUDA libraries
#      it cannot import without; see the requirements' header) and takes a few
#      minutes; later calls return at once.
# Usage: "$(scripts/pytorch-env.sh)" pytorch/matmul --size 1024
#        scripts/pytorch-env.sh --no-venv   rules 1 and 2 only (exit 1 when neither
#                                           gives one): the GPU run, which cannot download
set -euo pipefail
no_venv=0
if [[ ${1:-} == --no-venv ]]; then no_venv=1; fi
root=$(cd "$(dirname "$0")/.." && pwd)
req=$root/pytorch/requirements.txt
log() { echo "pytorch-env: $*" >&2; }

if [[ -n ${CANDLE_LAB_PYTHON:-} ]]; then
  echo "$CANDLE_LAB_PYTHON"
  exit 0
fi
if python3 -c 'import torch' >/dev/null 2>&1; then
  command -v python3
  exit 0
fi
if ((no_venv)); then
  log "no CANDLE_LAB_PYTHON and python3 has no torch"
  exit 1
fi

hash=$({ cat "$req"; python3 -VV; } | sha256sum | cut -c1-12)
venv=${XDG_CACHE_HOME:-$HOME/.cache}/candle-lab/venv-$hash
mkdir -p "$(dirname "$venv")"
# One maker at a time; the others wait, then find it made.
exec 9>"$venv.lock"
flock 9
if [[ -f $venv/.complete ]]; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
log "making $venv: torch and its CUDA libraries from PyPI (about 2.1 GB, once)"
start=$SECONDS
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
  --no-deps --only-binary=:all: -r "$req" >&2
"$venv/bin/python" -W ignore -c 'import torch, jsonschema; torch.ones(2, 2) @ torch.ones(2, 2)' >&2 ||
  { log "the new venv cannot run torch; left at $venv for a look"; exit 1; }
touch "$venv/.complete"
log "made in $((SECONDS - start)) s"
echo "$venv/bin/python"
