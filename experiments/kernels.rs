//! Kernels: can we do better than Candle, and how? The suite's own kernels
//! (`candle_lab::kernels`: RMSNorm, RMSNorm fused with its weight, softmax,
//! SwiGLU, copy, add; CustomOps with CPU and CUDA code) beside Candle's op,
//! the same math from primitive ops, and a copy of the same bytes measured in
//! the same run, per op, shape (the block's, SmolLM2-135M's, a large
//! memory-bound one) and precision; and the matrix-vector products
//! (`kernels::linear`, `kernels::QLinear`) against Candle's matmul and
//! QMatMul at SmolLM2-135M's and Llama-3-8B's decode shapes, per weight type,
//! against the bound their bytes set. The measurement is
//! `candle_lab::bench::kernels`; docs/kernels.md says how to read it.

use anyhow::{bail, Result};
use candle_core::Device;
use candle_lab::bench::kernels::matvec::{
    self, MatvecConfig, WeightType, DEFAULT_WEIGHTS, MATRICES, MODELS,
};
use candle_lab::bench::kernels::{
    self, cases, default_large_mib, default_plan, Config, CASE_NAMES, DRAM,
};
use candle_lab::cli::{LadderFlags, RunCounts};
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::precision::Precision;
use candle_lab::schema::{Body, KernelOp, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The suite's own kernels against Candle's ops, the composed forms and the
/// copy ceiling, per op, shape and precision.
#[derive(clap::Args, Debug)]
struct Flags {
    /// Runs per variant (defaults: 10 timed and 2 warm-up on the CPU, 30 and 5
    /// on a GPU).
    #[command(flatten)]
    counts: RunCounts,

    /// Precisions, comma-separated: fp32, fp16, bf16 (f32, f16 also accepted).
    #[arg(long, value_delimiter = ',', default_value = "fp32,fp16,bf16", value_parser = precision)]
    dtypes: Vec<Precision>,

    /// Ops, comma-separated: rms_norm, rms_norm_mul, softmax, swiglu, copy,
    /// add, and matvec (the matrix-vector rows: --models, --weights, --tokens).
    #[arg(long, value_delimiter = ',',
          default_value = "rms_norm,rms_norm_mul,softmax,swiglu,copy,add,matvec",
          value_parser = op)]
    ops: Vec<Op>,

    /// The matrix-vector rows' shapes, comma-separated: smollm2-135m,
    /// llama-3-8b (each's layer projections; SmolLM2's output head too).
    #[arg(long, value_delimiter = ',', default_value = "smollm2-135m,llama-3-8b",
          value_parser = model)]
    models: Vec<String>,

    /// Which weights of each model shape, comma-separated: q_o, k_v, gate_up,
    /// down, head (SmolLM2's only: Llama-3-8B's 525M-weight head is left out).
    #[arg(long, value_delimiter = ',', default_value = "q_o,k_v,gate_up,down,head",
          value_parser = matrix)]
    matrices: Vec<String>,

    /// The matrix-vector rows' weight types, comma-separated: fp32, fp16,
    /// bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k (the
    /// k-quants where a row is whole 256-value blocks); q5_1, q2_k and q3_k
    /// only when named.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_WEIGHTS,
          value_parser = WeightType::parse)]
    weights: Vec<WeightType>,

    /// Activation rows of a matrix-vector call (1: a decode step; more: a
    /// prompt chunk).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    tokens: u64,

    /// Shapes, comma-separated: block-prefill, block-decode, smollm2-prefill,
    /// smollm2-decode, large, dram (fp32 only: each tensor half the
    /// ladder's memory footprint, four times the last cache).
    #[arg(long, value_delimiter = ',',
          default_value = "block-prefill,block-decode,smollm2-prefill,smollm2-decode,large,dram",
          value_parser = case_name)]
    cases: Vec<String>,

    /// Tokens of the prefill cases, and the KV cache's length in decode
    /// (default: the block's, 128 on the CPU and 2048 on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    seq: Option<u64>,

    /// Size of one f32 tensor of the large case, in MiB (default: 16 on the
    /// CPU, 1024 on a GPU); 4096 columns.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    large_mib: Option<u64>,

    #[command(flatten)]
    ladder: LadderFlags,
}

/// An `--ops` value: one of the element-wise kernels, or the matrix-vector rows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Kernel(KernelOp),
    Matvec,
}

fn op(s: &str) -> Result<Op, String> {
    if s.trim() == "matvec" {
        return Ok(Op::Matvec);
    }
    KernelOp::parse(s)
        .map(Op::Kernel)
        .map_err(|e| format!("{e}, matvec"))
}

fn model(s: &str) -> Result<String, String> {
    let s = s.trim();
    match MODELS.contains(&s) {
        true => Ok(s.to_string()),
        false => Err(format!(
            "unknown model '{s}': expected one of {}",
            MODELS.join(", ")
        )),
    }
}

fn matrix(s: &str) -> Result<String, String> {
    let s = s.trim();
    match MATRICES.contains(&s) {
        true => Ok(s.to_string()),
        false => Err(format!(
            "unknown matrix '{s}': expected one of {}",
            MATRICES.join(", ")
        )),
    }
}

/// fp32, fp16 or bf16 (and their aliases): what the kernels run, and all a
/// refusal lists.
fn precision(s: &str) -> Result<Precision, String> {
    match s.parse::<Precision>() {
        Ok(p @ (Precision::F32 | Precision::F16 | Precision::Bf16)) => Ok(p),
        Ok(p) => Err(format!("'{p}': the kernels run fp32, fp16 and bf16")),
        Err(_) => Err(format!(
            "unknown dtype '{}': expected fp32, fp16 or bf16",
            s.trim()
        )),
    }
}

fn case_name(s: &str) -> Result<String, String> {
    let s = s.trim();
    if CASE_NAMES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown case '{s}': expected one of {}",
            CASE_NAMES.join(", ")
        ))
    }
}

/// `items` in the order given, each once.
fn unique<T: PartialEq + Clone>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in items {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

/// What the flags ask for, with the device's defaults where a flag is absent.
fn config(args: &Flags, on_cuda: bool) -> Result<Config> {
    let large_mib = args.large_mib.unwrap_or_else(|| default_large_mib(on_cuda));
    let seq = args.seq.map(|n| n as usize);
    let ops = unique(&args.ops);
    let kernel_ops: Vec<KernelOp> = ops
        .iter()
        .filter_map(|o| match o {
            Op::Kernel(k) => Some(*k),
            Op::Matvec => None,
        })
        .collect();
    let matvec = ops.contains(&Op::Matvec).then(|| MatvecConfig {
        models: unique(&args.models),
        matrices: unique(&args.matrices),
        weights: unique(&args.weights),
        tokens: args.tokens as usize,
    });
    let none =
        |m: &MatvecConfig| m.models.is_empty() || m.matrices.is_empty() || m.weights.is_empty();
    if matvec.as_ref().is_some_and(none) {
        bail!("nothing to run for matvec: --models, --matrices and --weights each need one value");
    }
    if let Some(m) = &matvec {
        matvec_rows_exist(m)?;
    }
    let cfg = Config {
        ops: kernel_ops,
        precisions: unique(&args.dtypes),
        cases: cases(on_cuda, &unique(&args.cases), seq, large_mib),
        dram: args.cases.iter().any(|c| c == DRAM),
        matvec,
        plan: args.counts.plan(default_plan(on_cuda)),
        ladder_max: args.ladder.max_bytes(),
    };
    let elementwise = !cfg.ops.is_empty();
    if elementwise && ((cfg.cases.is_empty() && !cfg.dram) || cfg.precisions.is_empty()) {
        bail!("nothing to run: --cases and --dtypes each need one value");
    }
    if elementwise && cfg.cases.is_empty() && !cfg.precisions.contains(&Precision::F32) {
        bail!("nothing to run: the dram case runs at fp32 only, and --dtypes has no fp32");
    }
    if !elementwise && cfg.matvec.is_none() {
        bail!("nothing to run: --ops needs one value");
    }
    Ok(cfg)
}

/// Refuses filters that together select no matrix-vector row (a model
/// without the matrix asked for, or weight types whose blocks do not divide
/// its rows), naming them and why, before any work: the run would write an
/// empty report and exit 0.
fn matvec_rows_exist(m: &MatvecConfig) -> Result<()> {
    let mut why = Vec::new();
    for model in &m.models {
        let all = matvec::matrices(model)?;
        for name in &m.matrices {
            let Some(matrix) = all.iter().find(|x| x.name == name) else {
                why.push(format!("{model} has no {name} rows"));
                continue;
            };
            if m.weights.iter().any(|w| w.fits(matrix.k)) {
                return Ok(());
            }
            why.push(format!(
                "{model} {name}'s rows of {} values are not whole blocks of {}",
                matrix.k,
                names(&m.weights)
            ));
        }
    }
    bail!(
        "nothing to run for matvec: --models {}, --matrices {} and --weights {} select no row ({})",
        m.models.join(","),
        m.matrices.join(","),
        names(&m.weights),
        why.join("; ")
    )
}

fn names(weights: &[WeightType]) -> String {
    let names: Vec<String> = weights.iter().map(|w| w.name()).collect();
    names.join(",")
}

struct Kernels;

impl Experiment for Kernels {
    const KIND: Kind = Kind::Kernels;
    const ABOUT: &'static str = "The suite's own kernels against Candle's ops, the composed \
        forms and a copy of the same bytes, per op, shape and precision.";
    /// The block's and SmolLM2's shapes at 16 tokens (the large case's
    /// Candle rows at 16 bits take seconds even at 1 MiB in a dev build);
    /// SmolLM2's Q/O and down weights in five types for the matrix-vector
    /// rows (its head and the 8B shapes take minutes in a dev build).
    #[rustfmt::skip]
    const SMALL: &'static [&'static str] = &[
        "--cases", "block-prefill,block-decode,smollm2-decode,dram", "--seq", "16", "--iters", "3",
        "--warmup", "1", "--ladder-max-mib", "4", "--models", "smollm2-135m", "--matrices", "q_o,down",
        "--weights", "fp32,bf16,q8_0,q4_1,q4_k",
    ];
    /// `just results`: 5 samples a variant, and the large case at 16 MiB a
    /// tensor (past the caches it is hundreds of MiB, and Candle's 16-bit
    /// forms take seconds a call there: `just kernels` runs it).
    const RESULTS: &'static [&'static str] =
        &["--large-mib", "16", "--iters", "5", "--warmup", "1"];
    type Flags = Flags;
    type Config = Config;

    fn config(f: &Flags, on_cuda: bool) -> Result<Config> {
        config(f, on_cuda)
    }

    fn needs(cfg: &Config, device: &Device) -> Result<Vec<Need>> {
        kernels::needs(cfg, device)
    }

    fn run(cfg: &Config, s: &Session) -> Result<Body> {
        candle_lab::note!(
            "kernels: {} ops x {} cases x {} precisions{}, warmup {}, iters {}, on {}",
            cfg.ops.len(),
            cfg.cases.len() + usize::from(cfg.dram),
            cfg.precisions.len(),
            cfg.matvec.as_ref().map_or(String::new(), |m| format!(
                ", matvec at {} model shapes x {} weight types",
                m.models.len(),
                m.weights.len()
            )),
            cfg.plan.warmup,
            cfg.plan.iters,
            s.info.label
        );
        Ok(Body::Kernels(kernels::run(&s.device, cfg, s.telemetry())?))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Kernels>()
}
