//! Generate: a real model, end to end. A GGUF of an architecture the model
//! layer runs (Llama, Qwen 2/3, Gemma 3; by default SmolLM2-135M-Instruct from
//! `just model`; `--model FILE` or a name another, or several in turn;
//! `--shape NAME` random weights at a larger model's shape) answers a prompt per
//! precision: its quantization as stored, q8_0, fp32, tf32 (on a GPU), fp16,
//! bf16. Per precision: the greedy answer, prompt processing and generation
//! tokens/s as llama-bench reports them, time to first token, peak memory,
//! generation against its bandwidth bound, the speedups over fp32 beside the
//! matmuls alone, and where a token's time goes. The measurement is
//! `candle_lab::bench::generate`; docs/generate.md says how it measures.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::generate::{self, setup, DtypeArg};
use candle_lab::cli::{LadderFlags, RunCounts};
use candle_lab::clock::Plan;
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::export::output::Input;
use candle_lab::export::views::Width;
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::model::weights::{self, Source};
use candle_lab::schema::{Body, KernelChoice, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Generate;

/// Each model read and checked, its tokenizer built, and its run's plan; a
/// dry run prints the plans.
struct Run(Vec<setup::Prepared>, bool);

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.0 {
            writeln!(f, "{}", p.found())?;
            p.config.fmt(f)?;
        }
        if self.1 {
            write!(
                f,
                "\n--prepare-only: the weights and each row's model, timed; nothing measured"
            )?;
        }
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
struct Flags {
    /// Runs per test (defaults: 10 timed and 2 warm-up on a GPU, 3 and 1 on the CPU).
    #[command(flatten)]
    counts: RunCounts,

    #[command(flatten)]
    ladder: LadderFlags,

    /// GGUF files, comma-separated, each run in turn with the same flags: a
    /// path, or a name `just model NAME` fetches (smollm2, gemma3). Llama,
    /// Qwen 2/3 and Gemma 3 files (default: smollm2).
    #[arg(
        long,
        value_name = "FILE|NAME",
        value_delimiter = ',',
        conflicts_with = "shape"
    )]
    model: Vec<String>,

    /// Random weights (seeded, never zeros) at a named model's shape instead of
    /// a file: llama-3.2-1b, llama-3-8b (tiny, tiny-qwen2, tiny-qwen3,
    /// tiny-gemma3: smoke tests' of each architecture). Speed and memory only:
    /// no text.
    #[arg(long, value_name = "NAME",
          value_parser = clap::builder::PossibleValuesParser::new(weights::SHAPE_NAMES))]
    shape: Option<String>,

    /// Precisions, comma-separated: stored (the file's own types), q4_0, q4_1,
    /// q5_0, q5_1, q8_0, q2_k..q6_k (every weight requantized to it),
    /// q2_k_mix, q3_k_m, q4_k_m, q5_k_m (llama.cpp's mixtures, each tensor's
    /// type by its rules), fp32, tf32 (a GPU), fp16, bf16 (default: stored,
    /// q8_0, fp32, tf32 on a GPU, fp16, bf16).
    #[arg(long, value_delimiter = ',')]
    dtypes: Vec<DtypeArg>,

    /// Whose kernels the rows run with: candle (Candle's matmul, candle-nn's
    /// RMSNorm and softmax, Candle's SwiGLU and adds; the quantized rows are
    /// candle-transformers' quantized model of the architecture), lab (the suite's own, `just
    /// kernels`: its matrix-vector and quantized linear ops on the GGUF
    /// blocks as stored; on a GPU rope is candle-nn's and attention the
    /// composed form), or both (each row, then again with the suite's, side
    /// by side).
    #[arg(long, default_value = "candle")]
    kernels: KernelChoice,

    /// The user's message, formatted with the file's chat template (default:
    /// a question about the sky).
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,

    /// New tokens of the answer and of a tg test (default: 128 on a GPU, as
    /// llama-bench's tg128; 32 on the CPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    tokens: Option<u64>,

    /// Tokens of a pp test (default: 512 on a GPU, as llama-bench's pp512; 64 on the CPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pp_tokens: Option<u64>,

    /// Seed of random weights and of the parts' random inputs.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// Print the full tables (14 columns of speed, each row against fp32,
    /// where a token's time goes), as results/README.md and the CSV hold them;
    /// by default the terminal gets a table that fits 120 columns (precision,
    /// kernels, pp and tg tokens/s, % of the bound, what binds tg), the rest
    /// in the notes under it.
    #[arg(long)]
    wide: bool,

    /// Make the weights and load every row's model as a run does, each step
    /// timed, and stop: nothing is measured, the result has no rows and its
    /// notes give the times (the host side the GPU call's plan is sized from:
    /// scripts/gpu-run.sh --rehearse). Writes no file.
    #[arg(long, conflicts_with_all = ["output", "results_dir"])]
    prepare_only: bool,
}

impl Experiment for Generate {
    const KIND: Kind = Kind::Generate;
    const ABOUT: &'static str =
        "A whole model (Llama, Qwen 2/3, Gemma 3) per precision: its answer, pp and tg \
        tokens/s against the bandwidth bound, the speedups over fp32, where a token's time goes.";
    /// Random weights at a smoke test's shape: no model file needed.
    const SMALL: &'static [&'static str] = &[
        "--shape",
        "tiny",
        "--tokens",
        "4",
        "--pp-tokens",
        "8",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--kernels",
        "both",
        "--ladder-max-mib",
        "4",
    ];
    /// The real file is too large to travel with the GPU call's bundle: a
    /// Llama-3.2-1B's shape with random weights instead, sized for the call's
    /// 90 s limit (scripts/gpu-run.sh's plan; the arithmetic is in
    /// docs/gpu.md): the weights made once (4.9 GB of f32, 6 s on this
    /// machine's two cores, measured; q4_1 quantized once, 9 s), then per row
    /// the answer and 1 warm-up and 3 timed runs of each test, pp512 and
    /// tg128, the rows after fp32 each timed beside a copy of its model. No
    /// q8_0 row (a second quantization, about 10 s here) and no tf32 row (a
    /// cuBLAS mode a launch-bound decode cannot show; matmul and block
    /// measure it): rows the limit cannot spare with the fp32 copy's tests.
    const GPU_CALL: &'static [&'static str] = &[
        "--shape",
        "llama-3.2-1b",
        "--dtypes",
        "stored,fp32,fp16,bf16",
        "--iters",
        "3",
        "--warmup",
        "1",
    ];
    /// `just results`: SmolLM2 and Gemma 3 (both fetched by the recipe), each
    /// as stored (SmolLM2's Q4_1, Gemma's Q4_K_M), q4_k_m (SmolLM2's requantized
    /// by llama.cpp's rules: Q5_0, Q8_0, Q4_K, Q6_K tensors; Gemma's file is
    /// one, so its stored row), q8_0 and fp32, on the suite's kernels, at
    /// llama-bench's sizes on the CPU (pp64, tg32, 3 timed runs: an interval
    /// on every ratio), 60-73 s of the job on two cores. No warm-up run: the
    /// answer, computed first, runs the same prefill and decode steps.
    /// Candle's rows (`just generate --kernels both`) are left out: its Q4_1
    /// and Q5_0 CPU dot products are scalar, and its rows at these sizes
    /// would take the run past two minutes more.
    const RESULTS: &'static [&'static str] = &[
        "--model",
        "smollm2,gemma3",
        "--dtypes",
        "stored,q4_k_m,q8_0,fp32",
        "--kernels",
        "lab",
        "--tokens",
        "32",
        "--pp-tokens",
        "64",
        "--iters",
        "3",
        "--warmup",
        "0",
    ];
    type Flags = Flags;
    type Config = Run;

    /// The model is read and checked here, before the device opens: a bad
    /// file is the run's first word.
    fn config(f: &Flags, on_cuda: bool) -> Result<Run> {
        Ok(Run(
            setup::prepare(&request(f, on_cuda), on_cuda)?,
            f.prepare_only,
        ))
    }

    fn width(f: &Flags) -> Width {
        match f.wide {
            true => Width::Wide,
            false => Width::Compact,
        }
    }

    /// The models run one after another: each must fit alone.
    fn needs(r: &Run, _: &Device) -> Result<Vec<Need>> {
        Ok(r.0
            .iter()
            .flat_map(|p| generate::needs(&p.source, &p.config))
            .collect())
    }

    fn inputs(r: &Run) -> Vec<Input> {
        r.0.iter()
            .filter_map(|p| match &p.source {
                Source::File(f) => Some(Input::new("the model", &f.path)),
                Source::Random { .. } => None,
            })
            .collect()
    }

    /// After every row, the files saved as they stand (as the sweep does
    /// after every point): a run stopped midway keeps its finished rows.
    fn run(r: &Run, s: &Session) -> Result<Body> {
        if r.1 {
            return Ok(Body::Generate(generate::prepare_only(&s.device, &r.0)?));
        }
        let result = generate::run(&s.device, &r.0, s.telemetry(), &mut |so_far| {
            s.save_progress(Body::Generate(so_far.clone()))
        })?;
        Ok(Body::Generate(result))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Generate>()
}

fn request(args: &Flags, on_cuda: bool) -> setup::Request {
    let pick = |v: Option<u64>, gpu: usize, cpu: usize| {
        v.map_or(if on_cuda { gpu } else { cpu }, |n| n as usize)
    };
    let default = if on_cuda {
        Plan {
            warmup: 2,
            iters: 10,
        }
    } else {
        Plan {
            warmup: 1,
            iters: 3,
        }
    };
    setup::Request {
        models: args.model.clone(),
        shape: args.shape.clone(),
        dtypes: args.dtypes.clone(),
        kernels: args.kernels,
        prompt: args.prompt.clone(),
        tg_tokens: pick(args.tokens, 128, 32),
        pp_tokens: pick(args.pp_tokens, 512, 64),
        seed: args.seed,
        plan: args.counts.plan(default),
        ladder_max: args.ladder.max_bytes(),
    }
}
