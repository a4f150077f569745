//! Scaling: one model's cost as its work grows. Per precision and kernel
//! set: generation (and prompt processing) after `--depth` tokens already in
//! the KV cache, prompt processing at each `--pp-lengths`, and `--batch`
//! sequences decoding together, every point against its own bound (memory:
//! the weights and the KV cache read at the ladder's bandwidth; compute: the
//! FLOPs at the row's measured peak), the batch's predicted ridge beside its
//! measured knee, and the KV cache's bytes and how many sequences fit. The
//! models are generate's; the measurement is `candle_lab::bench::scaling`;
//! docs/generate.md says how to read it.

use anyhow::Result;
use candle_core::{DType, Device};
use candle_lab::bench::generate::{setup, DtypeArg, RowKind};
use candle_lab::bench::scaling::{self, Axes};
use candle_lab::cli::{LadderFlags, RunCounts};
use candle_lab::clock::Plan;
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::export::output::Input;
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::model::quantize::Quant;
use candle_lab::model::weights::{self, Source};
use candle_lab::schema::{Body, KernelChoice, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Scaling;

/// The model read and checked, its rows and axes; a dry run prints them.
struct Run(scaling::Run);

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.0.prepared.found())?;
        writeln!(f, "{:?}", self.0.axes)?;
        writeln!(f, "rows (KV cache None: the row's own): {:?}", self.0.plan)?;
        self.0.prepared.config.fmt(f)
    }
}

/// A list flag's values, comma-separated, each at most `max` (a zero is refused by
/// [`Axes::check`] in one line, naming the flag).
fn sizes(max: u64) -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(0..=max)
}

#[derive(clap::Args, Debug)]
struct Flags {
    /// Runs per point (defaults: 5 timed and 1 warm-up on a GPU, 3 and 1 on the CPU).
    #[command(flatten)]
    counts: RunCounts,

    #[command(flatten)]
    ladder: LadderFlags,

    /// A GGUF file, or a name `just model NAME` fetches (smollm2, gemma3;
    /// default: smollm2), as generate takes it.
    #[arg(long, value_name = "FILE|NAME", conflicts_with = "shape")]
    model: Option<String>,

    /// Random weights at a named model's shape instead of a file (as generate's).
    #[arg(long, value_name = "NAME",
          value_parser = clap::builder::PossibleValuesParser::new(weights::SHAPE_NAMES))]
    shape: Option<String>,

    /// Precisions, comma-separated, as generate takes them (default: stored).
    #[arg(long, value_delimiter = ',')]
    dtypes: Vec<DtypeArg>,

    /// Whose kernels: candle, lab or both, as generate's (default: lab).
    #[arg(long, default_value = "lab")]
    kernels: KernelChoice,

    /// Context depths, comma-separated: tokens in the KV cache before a
    /// point's tg and pp tests (default: 0,512,2048).
    #[arg(long, value_delimiter = ',', value_parser = sizes(1 << 20))]
    depth: Vec<u64>,

    /// Prompt lengths of the prompt axis, comma-separated (default: 64,512,2048 on
    /// the CPU; 512,2048,8192 on a GPU).
    #[arg(long, value_delimiter = ',', value_parser = sizes(1 << 20))]
    pp_lengths: Vec<u64>,

    /// Sequences decoding together, comma-separated (default: 1,2,4,8,16 on
    /// the CPU; 1,4,16,64,256 on a GPU).
    #[arg(long, value_delimiter = ',', value_parser = sizes(4096))]
    batch: Vec<u64>,

    /// Tokens a tg test generates per sequence (default: 32; 128 on a GPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    tokens: Option<u64>,

    /// Tokens of each sequence's prompt before a batch's decode, and of the
    /// pp test at each depth (default: 64; 512 on a GPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pp_tokens: Option<u64>,

    /// Precisions of the KV cache, comma-separated, each row run at each:
    /// row (the row's own: its activations', f32 for a quantized row),
    /// fp32, fp16, bf16 (default: row). A 16-bit cache under f32
    /// activations halves the bytes a deep step reads and a sequence keeps,
    /// as llama.cpp's default f16 cache; a cache other than a row's own runs
    /// on the suite's kernels on the CPU (16 bits under f32 activations),
    /// the other pairings are left out with a note.
    #[arg(long, value_delimiter = ',')]
    kv_cache: Vec<KvArg>,

    /// Seed of random weights and of the batch's made-up prompts.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// A KV cache's precision as `--kv-cache` takes it.
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
enum KvArg {
    Row,
    Fp32,
    Fp16,
    Bf16,
}

impl KvArg {
    fn dtype(self) -> Option<DType> {
        match self {
            Self::Row => None,
            Self::Fp32 => Some(DType::F32),
            Self::Fp16 => Some(DType::F16),
            Self::Bf16 => Some(DType::BF16),
        }
    }
}

impl Experiment for Scaling {
    const KIND: Kind = Kind::Scaling;
    const ABOUT: &'static str =
        "A model's cost as work grows: tg and pp at a context depth, pp at a prompt length, \
        decode of B sequences together; every point against its memory or compute bound, the \
        batch's ridge, the KV cache's bytes and capacity.";
    /// Random weights at a smoke test's shape, every axis at two points.
    const SMALL: &'static [&'static str] = &[
        "--shape",
        "tiny",
        "--depth",
        "0,8",
        "--pp-lengths",
        "4,16",
        "--batch",
        "1,3",
        "--tokens",
        "4",
        "--pp-tokens",
        "4",
        "--iters",
        "2",
        "--warmup",
        "0",
        "--kernels",
        "both",
        "--ladder-max-mib",
        "4",
    ];
    /// Llama-3.2-1B's shape with random weights (the real file does not
    /// travel), bf16 on the suite's kernels: depths to 3072 (its context is
    /// 4096, less tg128 and a pp512 at that depth), prompts to 4096, batches
    /// to 64 (docs/gpu.md's plan sizes it).
    const GPU_CALL: &'static [&'static str] = &[
        "--shape",
        "llama-3.2-1b",
        "--dtypes",
        "bf16",
        "--depth",
        "0,1024,3072",
        "--pp-lengths",
        "512,4096",
        "--batch",
        "1,4,16,64",
        "--iters",
        "3",
        "--warmup",
        "1",
    ];
    /// `just results`: SmolLM2 as stored (Q4_1) on the suite's kernels, with
    /// its own f32 KV cache and with an f16 one (llama.cpp's default), the
    /// target's depth (2048) and a batch to 16.
    const RESULTS: &'static [&'static str] = &[
        "--model",
        "smollm2",
        "--kv-cache",
        "row,fp16",
        "--depth",
        "0,2048",
        "--pp-lengths",
        "64,512",
        "--batch",
        "1,2,4,8,16",
        "--tokens",
        "16",
        "--pp-tokens",
        "64",
        "--iters",
        "3",
        "--warmup",
        "1",
    ];
    type Flags = Flags;
    type Config = Run;

    fn config(f: &Flags, on_cuda: bool) -> Result<Run> {
        let req = request(f, on_cuda);
        let mut prepared = setup::prepare(&req, on_cuda)?;
        let prepared = prepared.remove(0);
        let list = |v: &[u64], cpu: &[u64], gpu: &[u64]| -> Vec<usize> {
            let v = match (v.is_empty(), on_cuda) {
                (false, _) => v,
                (true, false) => cpu,
                (true, true) => gpu,
            };
            v.iter().map(|&n| n as usize).collect()
        };
        let axes = Axes {
            depths: list(&f.depth, &[0, 512, 2048], &[0, 512, 2048]),
            pp_lengths: list(&f.pp_lengths, &[64, 512, 2048], &[512, 2048, 8192]),
            batches: list(&f.batch, &[1, 2, 4, 8, 16], &[1, 4, 16, 64, 256]),
        };
        let context = prepared.source.config().context;
        axes.check(&prepared.config, context)?;
        let kv = match f.kv_cache.is_empty() {
            true => vec![None],
            false => f.kv_cache.iter().map(|k| k.dtype()).collect(),
        };
        let cfg = &prepared.config;
        let (plan, kv_left_out) =
            scaling::planned(&prepared.source, &cfg.rows, cfg.kernels, &kv, !on_cuda)?;
        Ok(Run(scaling::Run {
            prepared,
            axes,
            plan,
            kv_left_out,
        }))
    }

    fn needs(r: &Run, _: &Device) -> Result<Vec<Need>> {
        Ok(scaling::needs(&r.0))
    }

    fn inputs(r: &Run) -> Vec<Input> {
        match &r.0.prepared.source {
            Source::File(f) => vec![Input::new("the model", &f.path)],
            Source::Random { .. } => Vec::new(),
        }
    }

    /// After every row, the files saved as they stand.
    fn run(r: &Run, s: &Session) -> Result<Body> {
        let memory = match s.device.is_cpu() {
            true => candle_lab::env::host_memory().map(|m| m.total_bytes),
            false => s.info.total_memory_bytes,
        };
        let result = scaling::run(&s.device, (&r.0, memory), s.telemetry(), &mut |so_far| {
            s.save_progress(Body::Scaling(so_far.clone()))
        })?;
        Ok(Body::Scaling(result))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Scaling>()
}

fn request(args: &Flags, on_cuda: bool) -> setup::Request {
    let pick = |v: Option<u64>, gpu: usize, cpu: usize| {
        v.map_or(if on_cuda { gpu } else { cpu }, |n| n as usize)
    };
    let default = match on_cuda {
        true => Plan {
            warmup: 1,
            iters: 5,
        },
        false => Plan {
            warmup: 1,
            iters: 3,
        },
    };
    let dtypes = match args.dtypes.is_empty() {
        true => vec![DtypeArg(RowKind::Quantized(Quant::Stored))],
        false => args.dtypes.clone(),
    };
    setup::Request {
        models: args.model.iter().cloned().collect(),
        shape: args.shape.clone(),
        dtypes,
        kernels: args.kernels,
        prompt: None,
        tg_tokens: pick(args.tokens, 128, 32),
        pp_tokens: pick(args.pp_tokens, 512, 64),
        seed: args.seed,
        plan: args.counts.plan(default),
        ladder_max: args.ladder.max_bytes(),
    }
}
