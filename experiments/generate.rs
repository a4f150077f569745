//! Generate: a real model, end to end. A Llama-architecture GGUF (by default
//! SmolLM2-135M-Instruct from `just model`; `--model FILE` another; `--shape
//! NAME` random weights at a larger model's shape) answers a prompt per
//! precision: its quantization as stored, q8_0, fp32, tf32 (on a GPU), fp16,
//! bf16. Per precision: the greedy answer, prompt processing and generation
//! tokens/s as llama-bench reports them, time to first token, peak memory,
//! generation against its bandwidth bound, the speedups over fp32 beside the
//! matmuls alone, and where a token's time goes. The measurement is
//! `candle_lab::bench::generate`; docs/generate.md says how it measures.

use anyhow::Result;
use candle_lab::bench::generate::{self, setup, DtypeArg};
use candle_lab::cli::{parse, result_file, Common, HostMemoryFlag, RunCounts};
use candle_lab::clock::Plan;
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::{fits, CountingAlloc};
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::Body;
use candle_lab::telemetry::{self, Telemetry};
use clap::Parser;
use std::path::PathBuf;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// A whole Llama model per precision: its answer, pp and tg tokens/s against
/// the bandwidth bound, the speedups over fp32, where a token's time goes.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Runs per test (defaults: 10 timed and 2 warm-up on a GPU, 3 and 1 on the CPU).
    #[command(flatten)]
    counts: RunCounts,

    /// A Llama-architecture GGUF file (default: the one `just model` fetches).
    #[arg(long, value_name = "FILE", conflicts_with = "shape")]
    model: Option<PathBuf>,

    /// Random weights (seeded, never zeros) at a named model's shape instead of
    /// a file: llama-3.2-1b, llama-3-8b (tiny: a smoke test's). Speed and memory
    /// only: no text.
    #[arg(long, value_name = "NAME")]
    shape: Option<String>,

    /// Precisions, comma-separated: stored (the file's own type), q4_0, q4_1,
    /// q5_0, q5_1, q8_0, q2_k..q6_k (requantized), fp32, tf32 (a GPU), fp16,
    /// bf16 (default: stored, q8_0, fp32, tf32 on a GPU, fp16, bf16).
    #[arg(long, value_delimiter = ',')]
    dtypes: Vec<DtypeArg>,

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

    #[command(flatten)]
    host: HostMemoryFlag,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn request(args: &Args, on_cuda: bool) -> setup::Request {
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
        model: args.model.clone(),
        shape: args.shape.clone(),
        dtypes: args.dtypes.clone(),
        prompt: args.prompt.clone(),
        tg_tokens: pick(args.tokens, 128, 32),
        pp_tokens: pick(args.pp_tokens, 512, 64),
        seed: args.seed,
        plan: args.counts.plan(default),
    }
}

fn run(args: Args) -> Result<Completion> {
    // The model is checked before the device opens: a bad file is the first word.
    let expects_cuda = args.common.device.expects_cuda();
    let mut prepared = setup::prepare(&request(&args, expects_cuda), expects_cuda)?;
    if args.common.dry_run {
        return args.common.dry_run("generate", &args, &prepared.config);
    }
    let (device, info) = select(args.common.device)?;
    if device.is_cuda() != expects_cuda {
        prepared = setup::prepare(&request(&args, device.is_cuda()), device.is_cuda())?;
    }
    let (source, cfg) = (&prepared.source, &prepared.config);
    fits::check_all(&device, &generate::needs(source, cfg), args.host.check())?;
    let outputs = args.common.outputs("generate", &info)?;
    args.common.wait_for_quiet()?;
    let telemetry = Telemetry::open(&device);
    candle_lab::note!("{}", telemetry::line(&telemetry.source()));
    let result = generate::run(&device, source, cfg, prepared.text.as_ref(), &telemetry)?;
    let failed: Vec<String> = result
        .rows
        .iter()
        .filter(|r| r.measured.is_none())
        .map(|r| r.precision.clone())
        .collect();
    let done = match failed.len() {
        0 => Completion::Complete,
        _ => Completion::RowsFailed {
            failed,
            total: result.rows.len(),
        },
    };
    let file = result_file(info, Body::Generate(result));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(done)
}
