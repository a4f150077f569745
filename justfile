# candle-lab: `just` lists the recipes. Experiments write results/<machine>/<name>.json.

set shell := ["bash", "-euo", "pipefail", "-c"]

# `--features cuda` when a CUDA toolkit is on PATH (nvcc), else a CPU-only build.
# Override with CANDLE_LAB_FEATURES="--features cuda" (or "" for CPU-only).
features := if env("CANDLE_LAB_FEATURES", "auto") != "auto" { env("CANDLE_LAB_FEATURES") } else if `command -v nvcc >/dev/null 2>&1 && echo yes || echo no` == "yes" { "--features cuda" } else { "" }
run := "cargo run --release --quiet " + features + " --bin"
bundle := ".gpu-bundle/candle-lab-cuda.tar.xz"

# List the recipes
default:
    @just --list --unsorted

# Rank, shape, dtype, bytes, device; views; a host-to-device transfer
basics *args: _which-build
    {{run}} basics -- --results-dir results {{args}}

# Float formats' limits (max, eps, subnormals...) and what they do to numbers
precision *args: _which-build
    {{run}} precision -- --results-dir results {{args}}

# Square matmul per precision (reference defaults: 4096, 20 iters, 5 warm-up)
matmul *args: _which-build
    {{run}} matmul -- --results-dir results {{args}}

# The same fp32 matmul on CPU and GPU, and the speedup
cpu-vs-gpu *args: _which-build
    {{run}} cpu_vs_gpu -- --results-dir results {{args}}

# Matmul GFLOP/s across sizes x precisions, sampled adaptively: JSON, CSV and SVG
sweep *args: _which-build
    {{run}} sweep -- --results-dir results {{args}}

# Regenerate results/README.md and its charts from every machine folder
report:
    {{run}} report -- --results-dir results

# Compare result files with a baseline: compare A.json B.json [C.json ...]
compare *args:
    {{run}} compare -- {{args}}

# The reference benchmark: matmul and cpu_vs_gpu at 4096, 20 iters, 5 warm-up
bench: _which-build
    {{run}} matmul -- --size 4096 --iters 20 --warmup 5 --results-dir results
    {{run}} cpu_vs_gpu -- --size 4096 --iters 20 --warmup 5 --results-dir results

# The PyTorch reference (pytorch/matmul.py, same flags; --experiment matmul|cpu_vs_gpu)
pytorch *args:
    "$(scripts/pytorch-env.sh)" pytorch/matmul.py {{args}}

# Candle's matmul, then PyTorch's at the same settings, then `compare` on the two files
vs-pytorch *args: _which-build
    #!/usr/bin/env bash
    set -euo pipefail
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/vs-pytorch.XXXXXX")
    echo "vs-pytorch: result files in $dir" >&2
    {{run}} matmul -- --output "$dir/candle.json" {{args}}
    "$py" pytorch/matmul.py --output "$dir/pytorch.json" {{args}}
    {{run}} compare -- "$dir/candle.json" "$dir/pytorch.json"

# All four experiments: regenerates results/<machine>/, then results/README.md
results: basics precision bench report

# Unit and integration tests (CPU; small sizes, no timing asserted)
test:
    cargo test --all-targets

# The PyTorch reference's tests (CPU, n = 64; makes its venv the first time)
test-pytorch:
    "$(scripts/pytorch-env.sh)" -m unittest discover -s pytorch -p 'test_*.py'

# The tests with CUDA variants, on a machine with an NVIDIA GPU and CUDA toolkit
test-cuda:
    cargo test --all-targets --features cuda

# Formatting and clippy, warnings as errors
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings

# Compile the CUDA path without a GPU: PyPI CUDA 13 toolchain, clippy, release binaries
cuda-check:
    source "$(scripts/cuda-toolchain.sh)" && \
      cargo clippy --release --features cuda --all-targets -- -D warnings && \
      cargo build --release --features cuda --bins
    @echo "cuda-check: the cuda feature compiles, lints clean and links"

# Pack the CUDA release binaries and CUDA tests for scripts/gpu-run.sh
pack-gpu: cuda-check
    #!/usr/bin/env bash
    set -euo pipefail
    source "$(scripts/cuda-toolchain.sh)"
    stage=$(mktemp -d)
    cp target/release/{basics,precision,matmul,cpu_vs_gpu} "$stage/"
    # Test binaries that need no source tree: the library's unit tests and the pool test.
    cargo test --release --features cuda --lib --test cuda_pool --no-run --message-format=json \
      | python3 -c 'import json,sys; [print(m["target"]["name"], m["executable"]) for m in map(json.loads, sys.stdin) if m.get("executable")]' \
      | while read -r name exe; do cp "$exe" "$stage/test-$name"; done
    mkdir -p "$(dirname {{bundle}})"
    tar -cJf {{bundle}} -C "$stage" .
    ls -l {{bundle}}

# Everything CI runs: lint, tests, the PyTorch reference's tests, the CUDA compile check
ci: lint test test-pytorch cuda-check

_which-build:
    @echo "build: {{ if features == "" { "CPU-only (no nvcc on PATH; see README, On a GPU)" } else { features } }}" >&2

# Regenerate schema/result.schema.json from the result types (CI checks it is current)
schema:
    UPDATE_SCHEMA=1 cargo test --quiet --lib schema::tests::committed_json_schema_is_up_to_date
