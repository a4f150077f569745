//! Block: how much of matmul's precision speedup survives in a real model
//! layer. One decoder block of the kind every current LLM stacks, built from
//! candle-nn, timed end to end in prefill (the whole sequence) and decode (one
//! token against a KV cache) per precision, with where its time goes by op
//! class, the speedup over fp32 beside the matmul-only speedup and Amdahl's
//! prediction, fused kernels against primitive ops, and accuracy against f64.
//! `--save-weights` writes the weights and inputs for the PyTorch twin
//! (`pytorch/block.py --weights`). The measurement is `candle_lab::bench::block`.

use anyhow::Result;
use candle_lab::bench::block::{self, weights::HostWeights, Config};
use candle_lab::cli::{parse, result_file, Common, Dtypes, HostMemoryFlag, RunCounts};
use candle_lab::clock::Plan;
use candle_lab::device::select;
use candle_lab::export::{self, output};
use candle_lab::memory::{fits, CountingAlloc};
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::{Body, KernelChoice, Phase};
use candle_lab::telemetry::{self, Telemetry};
use clap::Parser;
use std::path::PathBuf;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// A decoder block per precision, prefill and decode: end to end, by op class,
/// fused against composed, accuracy against f64.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Runs per row (defaults: 20 timed and 3 warm-up on a GPU, 10 and 2 on the CPU).
    #[command(flatten)]
    counts: RunCounts,

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
    /// `pytorch/block.py --weights FILE`.
    #[arg(long, value_name = "FILE")]
    save_weights: Option<PathBuf>,

    /// Also write the fp32 rows' outputs (the tokens checked for accuracy: the
    /// first --accuracy-seq of the prefill, the decode token; f32,
    /// safetensors: y_prefill_fp32, y_decode_fp32) to FILE, for the PyTorch
    /// twin's check that both blocks compute the same.
    #[arg(long, value_name = "FILE")]
    save_output: Option<PathBuf>,

    /// Whose kernels the end-to-end rows run with: candle (candle-nn's fused
    /// RMSNorm, softmax and rope) or lab (the suite's own RMSNorm, softmax,
    /// SwiGLU and residual adds, `just kernels`; rope stays candle-nn's).
    #[arg(long, default_value = "candle", value_parser = kernel_choice)]
    kernels: KernelChoice,

    #[command(flatten)]
    host: HostMemoryFlag,
}

fn phase(s: &str) -> Result<Phase, String> {
    match s.trim() {
        "prefill" => Ok(Phase::Prefill),
        "decode" => Ok(Phase::Decode),
        _ => Err(format!("unknown phase '{s}': expected prefill or decode")),
    }
}

fn kernel_choice(s: &str) -> Result<KernelChoice, String> {
    match s.trim() {
        "candle" => Ok(KernelChoice::Candle),
        "lab" => Ok(KernelChoice::Lab),
        _ => Err(format!("unknown kernels '{s}': expected candle or lab")),
    }
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

/// The block the flags ask for, checked; and what its sizes are.
fn config(args: &Args, on_cuda: bool) -> Result<(Config, String)> {
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
    let default = if on_cuda {
        Plan {
            warmup: 3,
            iters: 20,
        }
    } else {
        Plan {
            warmup: 2,
            iters: 10,
        }
    };
    let cfg = Config {
        plan: args.counts.plan(default),
        precisions: args.dtypes.for_device(on_cuda)?,
        phases,
        seed: args.seed,
        kernels: args.kernels,
        shape,
    };
    cfg.check()?;
    let note = if sizes.iter().all(Option::is_none) && !on_cuda {
        "CPU sizes: a Llama-7B-like layer narrowed 8 times (hidden 512, 8 heads, MLP 1376) over \
         128 tokens, so a 2-core run takes seconds; on a GPU the defaults are the full layer \
         (4096, 32, 11008, 2048); --hidden --heads --kv-heads --mlp --seq set others"
    } else if sizes.iter().all(Option::is_none) {
        "GPU sizes: a Llama-7B-like layer (hidden 4096, 32 heads, MLP 11008) over 2048 tokens"
    } else {
        "sizes from the flags"
    };
    Ok((cfg, note.into()))
}

fn run(args: Args) -> Result<Completion> {
    if args.common.dry_run {
        let (cfg, _) = config(&args, args.common.device.expects_cuda())?;
        return args.common.dry_run("block", &args, &cfg);
    }
    let (device, info) = select(args.common.device)?;
    let (cfg, note) = config(&args, device.is_cuda())?;
    fits::check_all(&device, &block::needs(&cfg), args.host.check())?;
    let outputs = args.common.outputs("block", &info)?;
    let weights_out = args
        .save_weights
        .as_deref()
        .map(output::prepare)
        .transpose()?;
    let output_out = args
        .save_output
        .as_deref()
        .map(output::prepare)
        .transpose()?;
    args.common.wait_for_quiet()?;
    let telemetry = Telemetry::open(&device);
    candle_lab::note!("{}", telemetry::line(&telemetry.source()));
    let weights = HostWeights::random(&cfg.shape, cfg.seed)?;
    if let Some(out) = &weights_out {
        out.save_bytes(&weights.safetensors()?)?;
    }
    let (result, fp32_outputs) = block::run(&device, &cfg, &weights, &telemetry, note)?;
    if let Some(out) = &output_out {
        let named = fp32_outputs.iter().map(|(n, t)| (n.as_str(), t));
        out.save_bytes(&block::weights::to_safetensors(named)?)?;
    }
    let rows = result.phases.iter().flat_map(|p| &p.rows);
    let failed: Vec<String> = rows
        .clone()
        .filter(|r| r.measured.is_none())
        .map(|r| r.precision.to_string())
        .collect();
    let done = match failed.len() {
        0 => Completion::Complete,
        _ => Completion::RowsFailed {
            failed,
            total: rows.count(),
        },
    };
    let file = result_file(info, Body::Block(result));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(done)
}
