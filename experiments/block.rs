//! Block: how much of matmul's precision speedup survives in a real model
//! layer. One decoder block of the kind every current LLM stacks, built from
//! candle-nn, timed end to end in prefill (the whole sequence) and decode (one
//! token against a KV cache) per precision, with where its time goes by op
//! class, the speedup over fp32 beside the matmul-only speedup and Amdahl's
//! prediction, fused kernels against primitive ops, and accuracy against f64.
//! `--save-weights` writes the weights and inputs for the PyTorch twin
//! (`pytorch/block --weights`). The measurement is `candle_lab::bench::block`.

use std::path::PathBuf;

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::block::{self, weights::HostWeights, Config};
use candle_lab::cli::{Dtypes, LadderFlags, RunCounts};
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, KernelChoice, Kind, Phase};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct BlockExperiment;

#[derive(clap::Args, Debug)]
struct Flags {
    /// Runs per row (defaults: 20 timed and 3 warm-up on a GPU, 10 and 2 on the CPU).
    #[command(flatten)]
    counts: RunCounts,

    #[command(flatten)]
    ladder: LadderFlags,

    #[command(flatten)]
    dtypes: Dtypes,

    /// Sequences per call.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    batch: u64,

    /// Tokens of a prefill, and the KV cache's length in decode (default: 2048
    /// on a GPU, 128 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    seq: Option<u64>,

    /// Model width (default: 4096 on a GPU, 512 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 16))]
    hidden: Option<u64>,

    /// Query heads; they must divide --hidden (default: 32 on a GPU, 8 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    heads: Option<u64>,

    /// Key/value heads, each shared by heads / kv-heads query heads
    /// (grouped-query attention, as Llama-3, Mistral, Qwen and SmolLM have);
    /// they must divide --heads (default: as many as --heads).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    kv_heads: Option<u64>,

    /// The MLP's inner width (default: 11008 on a GPU, 1376 on the CPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 18))]
    mlp: Option<u64>,

    /// Phases, comma-separated: prefill, decode.
    #[arg(long, value_delimiter = ',', default_value = "prefill,decode", value_parser = phase)]
    phases: Vec<Phase>,

    /// Prefill tokens whose output is checked against the f64 run.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=4096))]
    accuracy_seq: u64,

    /// Seed of the random weights and inputs.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// Also write the weights and inputs (f32, safetensors) to FILE, for
    /// `pytorch/block --weights FILE`.
    #[arg(long, value_name = "FILE")]
    save_weights: Option<PathBuf>,

    /// Also write the fp32 rows' outputs (the tokens checked for accuracy: the
    /// first --accuracy-seq of the prefill, the decode token; f32,
    /// safetensors: y_prefill_fp32, y_decode_fp32) to FILE, for the PyTorch
    /// twin's check that both blocks compute the same.
    #[arg(long, value_name = "FILE")]
    save_output: Option<PathBuf>,

    /// Whose kernels the end-to-end rows run with: candle (candle-nn's fused
    /// RMSNorm, softmax and rope), lab (the suite's own RMSNorm, softmax,
    /// SwiGLU, residual adds, rope and attention, `just kernels`; on a GPU
    /// rope is candle-nn's and attention the composed form), or both
    /// (candle's, then each row timed again with the suite's, side by side).
    #[arg(long, default_value = "candle")]
    kernels: KernelChoice,
}

fn phase(s: &str) -> Result<Phase, String> {
    match s.trim() {
        "prefill" => Ok(Phase::Prefill),
        "decode" => Ok(Phase::Decode),
        _ => Err(format!("unknown phase '{s}': expected prefill or decode")),
    }
}

/// The block's config, the note on where its sizes came from, and the side
/// files it writes.
#[derive(Debug)]
struct Run {
    cfg: Config,
    note: String,
    save_weights: Option<PathBuf>,
    save_output: Option<PathBuf>,
}

impl Experiment for BlockExperiment {
    const KIND: Kind = Kind::Block;
    const ABOUT: &'static str = "A decoder block per precision, prefill and decode: end to end, \
        by op class, fused against composed, accuracy against f64.";
    const SMALL: &'static [&'static str] = &[
        "--hidden",
        "64",
        "--heads",
        "4",
        "--mlp",
        "128",
        "--seq",
        "16",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--ladder-max-mib",
        "4",
    ];
    /// Every precision the block has on a GPU, and the suite's kernels timed
    /// beside candle-nn's.
    const GPU_CALL: &'static [&'static str] =
        &["--dtypes", "fp32,tf32,fp16,bf16", "--kernels", "both"];
    /// The suite's kernels timed beside candle-nn's (the summary's line).
    const RESULTS: &'static [&'static str] = &["--kernels", "both"];
    type Flags = Flags;
    type Config = Run;

    fn config(f: &Flags, on_cuda: bool) -> Result<Run> {
        let (cfg, note) = block_config(f, on_cuda)?;
        Ok(Run {
            cfg,
            note,
            save_weights: f.save_weights.clone(),
            save_output: f.save_output.clone(),
        })
    }

    fn needs(r: &Run, _: &Device) -> Result<Vec<Need>> {
        Ok(block::needs(&r.cfg))
    }

    fn side_files(r: &Run) -> Vec<(&'static str, PathBuf)> {
        let named = [("weights", &r.save_weights), ("output", &r.save_output)];
        named
            .into_iter()
            .filter_map(|(n, p)| Some((n, p.clone()?)))
            .collect()
    }

    fn run(r: &Run, s: &Session) -> Result<Body> {
        let cfg = &r.cfg;
        let weights = HostWeights::random(&cfg.shape, cfg.seed)?;
        if let Some(out) = s.side_file("weights") {
            out.save_bytes(&weights.safetensors()?)?;
        }
        let (result, fp32_outputs) =
            block::run(&s.device, cfg, &weights, s.telemetry(), r.note.clone())?;
        if let Some(out) = s.side_file("output") {
            let named = fp32_outputs.iter().map(|(n, t)| (n.as_str(), t));
            out.save_bytes(&block::weights::to_safetensors(named)?)?;
        }
        Ok(Body::Block(result))
    }
}

/// The block the flags ask for, checked; and what its sizes are.
fn block_config(args: &Flags, on_cuda: bool) -> Result<(Config, String)> {
    let flag = |v: Option<u64>| v.map(|n| n as usize);
    let sizes = [
        flag(args.hidden),
        flag(args.heads),
        flag(args.kv_heads),
        flag(args.mlp),
        flag(args.seq),
    ];
    let shape = block::shape(
        on_cuda,
        sizes,
        args.batch as usize,
        args.accuracy_seq as usize,
    );
    let mut phases = Vec::new();
    for &p in &args.phases {
        if !phases.contains(&p) {
            phases.push(p);
        }
    }
    let cfg = Config {
        plan: args.counts.plan(block::default_plan(on_cuda)),
        precisions: args.dtypes.for_device(on_cuda)?,
        phases,
        seed: args.seed,
        kernels: args.kernels,
        ladder_max: args.ladder.max_bytes(),
        shape,
    };
    cfg.check()?;
    let note = block::sizes_note(on_cuda, sizes.iter().all(Option::is_none));
    Ok((cfg, note))
}

fn main() -> std::process::ExitCode {
    experiment::main::<BlockExperiment>()
}
