# candle-lab: `just` lists the recipes. Experiments write results/<machine>/<name>.json.

set shell := ["bash", "-euo", "pipefail", "-c"]

# `--features cuda` when a CUDA toolkit is on PATH (nvcc), else a CPU-only build.
# Override with CANDLE_LAB_FEATURES="--features cuda" (or "" for CPU-only).
# Programs run as release builds; CANDLE_LAB_PROFILE=dev reuses `just test`'s build (CI's smoke runs).
profile := env("CANDLE_LAB_PROFILE", "release")
features := if env("CANDLE_LAB_FEATURES", "auto") != "auto" { env("CANDLE_LAB_FEATURES") } else if `command -v nvcc >/dev/null 2>&1 && echo yes || echo no` == "yes" { "--features cuda" } else { "" }
run := "cargo run --profile " + profile + " --quiet " + features + " --bin"
# CANDLE_LAB_QUICK=1: `just results` and `just bench` at small sizes, as CI checks the README's two
# commands in order (`just results`, then `just test`); its numbers are not the machine's speed.
quick := env("CANDLE_LAB_QUICK", "")
bench_args := if quick != "" { "--size 128 --iters 3 --warmup 1" } else { "--size 4096 --iters 20 --warmup 5" }
memory_args := if quick != "" { "--mib 1 --matmul-size 128 --iters 2 --warmup 1" } else { "" }
# `just results` waits up to two minutes for a quiet machine before each timed program (README,
# "How it measures"); the quick CI run does not wait.
quiet_args := if quick != "" { "" } else { "--require-quiet 120" }
block_args := if quick != "" { "--hidden 64 --heads 4 --mlp 128 --seq 16 --iters 3 --warmup 1" } else { "" }
overhead_args := if quick != "" { "--first-size 128 --calls 20 --cache-sizes 64,128 --flush-mib 4 --iters 3 --warmup 1" } else { "" }
kernels_args := if quick != "" { "--seq 16 --large-mib 1 --iters 3 --warmup 1" } else { "" }

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

# Transfers, Candle's memory-bound ops against the copy ceiling, out of memory, roofline points
memory *args: _which-build
    {{run}} memory -- --results-dir results {{memory_args}} {{args}}

# First call vs warm, launch overhead of the smallest ops, cold vs hot cache
overhead *args: _which-build
    {{run}} overhead -- --results-dir results {{overhead_args}} {{args}}

# A decoder block per precision, prefill and decode: end to end, by op class, fused vs composed
block *args: _which-build
    {{run}} block -- --results-dir results {{block_args}} {{args}}

# The suite's own kernels against Candle's ops, the composed forms and the copy ceiling (docs/kernels.md)
kernels *args: _which-build
    {{run}} kernels -- --results-dir results {{kernels_args}} {{args}}

# The reference benchmark: matmul and cpu_vs_gpu at 4096, 20 iters, 5 warm-up
bench *args: _which-build
    {{run}} matmul -- {{bench_args}} --results-dir results {{args}}
    {{run}} cpu_vs_gpu -- {{bench_args}} --results-dir results {{args}}

# The PyTorch reference (pytorch/matmul.py, same flags; --experiment matmul|cpu_vs_gpu)
pytorch *args:
    "$(scripts/pytorch-env.sh)" pytorch/matmul.py {{args}}

# The PyTorch twin of `block` (pytorch/block.py; --weights FILE from `just block --save-weights FILE`)
pytorch-block *args:
    "$(scripts/pytorch-env.sh)" pytorch/block.py {{args}}

# Candle's block, then PyTorch's on the same weights, then `compare` on the two files
vs-pytorch-block *args: _which-build
    #!/usr/bin/env bash
    set -euo pipefail
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/vs-pytorch-block.XXXXXX")
    echo "vs-pytorch-block: result files in $dir" >&2
    {{run}} block -- --output "$dir/candle.json" --save-weights "$dir/weights.safetensors" {{args}}
    "$py" pytorch/block.py --output "$dir/pytorch.json" --weights "$dir/weights.safetensors" {{args}}
    {{run}} compare -- "$dir/candle.json" "$dir/pytorch.json"

# The PyTorch twin of `kernels` (pytorch/kernels.py, same flags)
pytorch-kernels *args:
    "$(scripts/pytorch-env.sh)" pytorch/kernels.py {{args}}

# Candle's kernels, then PyTorch's ops at the same settings, then `compare` on the two files
vs-pytorch-kernels *args: _which-build
    #!/usr/bin/env bash
    set -euo pipefail
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/vs-pytorch-kernels.XXXXXX")
    echo "vs-pytorch-kernels: result files in $dir" >&2
    {{run}} kernels -- --output "$dir/candle.json" {{args}}
    "$py" pytorch/kernels.py --output "$dir/pytorch.json" {{args}}
    {{run}} compare -- "$dir/candle.json" "$dir/pytorch.json"

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

# The reference lab's table beside this machine's results; writes results/<machine>/summary.md
summary *args: _which-build
    {{run}} summary -- --results-dir results {{args}}

# Every experiment but the sweep: regenerates results/<machine>/ and results/README.md, then ends
# with the summary (the reference lab's table beside this machine's values)
results: _which-build
    just basics
    just precision
    just bench {{quiet_args}}
    just memory {{quiet_args}}
    just overhead {{quiet_args}}
    just block {{quiet_args}}
    just kernels {{quiet_args}}
    just report
    just summary

# Unit and integration tests (CPU; small sizes, no timing asserted)
test:
    cargo test --all-targets

# The PyTorch reference's tests (CPU, small sizes; makes its venv the first time). The block's
# cross-check runs Candle's `block` (built here, the dev build) on the same weights.
test-pytorch:
    cargo build --quiet --bin block
    "$(scripts/pytorch-env.sh)" -m unittest discover -s pytorch -p 'test_*.py'

# The tests with CUDA variants, on a machine with an NVIDIA GPU and CUDA toolkit
test-cuda:
    cargo test --all-targets --features cuda

# Formatting, clippy and shellcheck, warnings as errors
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings
    shellcheck scripts/*.sh .ci/run

# Compile the CUDA path without a GPU: PyPI CUDA 13 toolchain, clippy, release binaries
# (release for both: they share one run of nvcc over Candle's kernels, and `just pack-gpu` reuses it)
cuda-check:
    source "$(scripts/cuda-toolchain.sh)" && \
      cargo clippy --release --features cuda --all-targets -- -D warnings && \
      cargo build --release --features cuda --bins
    @echo "cuda-check: the cuda feature compiles, lints clean and links"

# Pack the CUDA programs and tests for scripts/gpu-run.sh, for compute capability CAP (90: H100/H200)
pack-gpu cap="90":
    scripts/pack.sh cuda {{cap}}

# The same bundle without CUDA, for `scripts/gpu-run.sh --cpu` (CI)
pack-cpu:
    scripts/pack.sh cpu

# The one-call GPU run's own logic, on the CPU: steps, timeouts, signals, archive,
# summary, refusals (scripts/test-gpu-run.sh)
gpu-run-cpu: pack-cpu
    scripts/test-gpu-run.sh cpu

# The GPU call rehearsed without a GPU: the CUDA bundle through gpu-run.sh's CUDA branch,
# every step with its exact arguments under --dry-run, stand-ins for the driver
gpu-run-rehearsal: pack-gpu
    scripts/test-gpu-run.sh rehearsal

# Everything CI runs: lint, tests, the PyTorch reference's tests and a Candle-vs-PyTorch
# comparison at a small size, the one-call run on the CPU, the CUDA compile check, and
# the GPU call's rehearsal
ci: lint results-then-test test-pytorch vs-pytorch-smoke gpu-run-cpu cuda-check gpu-run-rehearsal

# The README's two commands in the README's order, as a new user runs them on a fresh clone:
# `just results` (at small sizes, on the dev build) and then `just test`. The results/ folder
# is put back as it was afterwards, so a local `just ci` leaves the committed results alone.
results-then-test:
    #!/usr/bin/env bash
    set -euo pipefail
    saved=$(mktemp -d)
    cp -a results "$saved/"
    trap 'rm -rf results && mv "$saved/results" results && rm -rf "$saved"' EXIT
    CANDLE_LAB_PROFILE=dev CANDLE_LAB_QUICK=1 just results
    just test

# Candle and PyTorch at a small size on the CPU, compared: the whole path CI can run
# (Candle's dev build: this checks the path, its times are not Candle's speed)
vs-pytorch-smoke:
    CANDLE_LAB_PROFILE=dev just vs-pytorch --device cpu --size 128 --iters 5 --warmup 1

_which-build:
    @echo "build: {{ if features == "" { "CPU-only (no nvcc on PATH; see README, On a GPU)" } else { features } }}" >&2

# Regenerate schema/result.schema.json from the result types (CI checks it is current)
schema:
    UPDATE_SCHEMA=1 cargo test --quiet --lib schema::tests::committed_json_schema_is_up_to_date
