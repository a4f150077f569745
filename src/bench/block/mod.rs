//! The `block` experiment's core: how much of matmul's precision speedup
//! survives in a whole decoder block (the model layer's
//! [`crate::model::layer::Layer`], with its inputs in [`weights`]). Per phase (prefill, decode) and precision: the block end to
//! end with the clock's usual rules, its FLOPs and least bytes
//! (`formulas`), each op class timed alone ([`parts`]), the speedup
//! over fp32 beside the matmul-only speedup and Amdahl's prediction from the
//! parts, each row's bandwidth against a copy of the same footprint measured
//! here, and the output against an f64 run of the same weights on the CPU
//! (composed ops: a plain reference the fused kernels are checked against).
//! Then candle-nn's fused kernels against the same math from primitive ops.
//! Every time, share and rate comes from one clock ([`clock`]: CUDA events on
//! a GPU, the wall clock on the CPU), recorded in the body.

mod measure;
mod parts;
pub mod weights;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};

use crate::bench::gemm_mode::GemmMode;
use crate::bench::ladder::Ladder;
use crate::clock::Plan;
use crate::formulas::amdahl;
use crate::memory::fits::Need;
use crate::model::cost::{block_bytes, block_flops, layer_params, Call};
use crate::model::layer::{Kernels, CPU_SHAPE, GPU_SHAPE};
use crate::model::{Arch, Config as ModelConfig};
use crate::precision::Precision;
use crate::schema::{
    BlockMeasured, BlockPhase, BlockResults, BlockRow, BlockShape, FusedRow, KernelChoice, Phase,
    RowStatus, TimeSource,
};
use crate::telemetry::Telemetry;
use weights::{Block, HostWeights};

/// What a `block` run asks for, checked by [`Config::check`].
#[derive(Clone, Debug)]
pub struct Config {
    pub shape: BlockShape,
    pub plan: Plan,
    pub precisions: Vec<Precision>,
    pub phases: Vec<Phase>,
    pub seed: u64,
    /// Whose kernels the end-to-end rows run with.
    pub kernels: KernelChoice,
    /// The ladder's largest footprint in bytes (`--ladder-max-mib`).
    pub ladder_max: Option<u64>,
}

/// Runs per row unless --iters and --warmup say otherwise: 20 timed after 3
/// warm-up on a GPU; 10 after 2 on the CPU, where a layer takes longer.
pub fn default_plan(on_cuda: bool) -> Plan {
    if on_cuda {
        Plan {
            warmup: 3,
            iters: 20,
        }
    } else {
        Plan {
            warmup: 2,
            iters: 10,
        }
    }
}

/// Where the shape came from, for the tables' notes: the device's defaults
/// (`defaults`: no size flag given) or the flags.
pub fn sizes_note(on_cuda: bool, defaults: bool) -> String {
    match (defaults, on_cuda) {
        (true, false) => "CPU sizes: a Llama-7B-like layer narrowed 8 times (hidden 512, 8 heads, \
             MLP 1376) over 128 tokens, so a 2-core run takes seconds; on a GPU the defaults are \
             the full layer (4096, 32, 11008, 2048); --hidden --heads --kv-heads --mlp --seq set \
             others"
            .into(),
        (true, true) => {
            "GPU sizes: a Llama-7B-like layer (hidden 4096, 32 heads, MLP 11008) over 2048 tokens"
                .into()
        }
        (false, _) => "sizes from the flags".into(),
    }
}

/// The shape from its flags (`[hidden, heads, kv_heads, mlp, seq]`), `None`
/// taking the device's default (key/value heads: as many as query heads).
pub fn shape(
    on_cuda: bool,
    [hidden, heads, kv_heads, mlp, seq]: [Option<usize>; 5],
    batch: usize,
    accuracy_seq: usize,
) -> BlockShape {
    let d = if on_cuda { GPU_SHAPE } else { CPU_SHAPE };
    let (hidden, heads) = (hidden.unwrap_or(d.0), heads.unwrap_or(d.1));
    let seq = seq.unwrap_or(d.3);
    BlockShape {
        batch,
        seq,
        hidden,
        heads,
        kv_heads: Some(kv_heads.unwrap_or(heads)),
        head_dim: hidden.checked_div(heads).unwrap_or(0),
        mlp: mlp.unwrap_or(d.2),
        rms_eps: 1e-5,
        rope_theta: 10_000.0,
        accuracy_seq: accuracy_seq.min(seq),
    }
}

impl Config {
    /// Refuses, before any work, a shape the block cannot have.
    pub fn check(&self) -> Result<()> {
        let s = &self.shape;
        if s.heads == 0 || !s.hidden.is_multiple_of(s.heads) {
            bail!(
                "--heads {}: must divide --hidden {} (each head takes hidden / heads)",
                s.heads,
                s.hidden
            );
        }
        let kv = s.kv_heads();
        if kv == 0 || !s.heads.is_multiple_of(kv) {
            bail!(
                "--kv-heads {kv}: must divide --heads {} (each key/value head serves heads / \
                 kv-heads query heads)",
                s.heads
            );
        }
        if !s.head_dim.is_multiple_of(2) {
            bail!(
                "--hidden {} / --heads {} = {}: rotary embedding needs an even head size",
                s.hidden,
                s.heads,
                s.head_dim
            );
        }
        if let Some(p) = self.precisions.iter().find(|p| {
            !matches!(
                p,
                Precision::F32 | Precision::Tf32 | Precision::F16 | Precision::Bf16
            )
        }) {
            bail!("--dtypes {p}: the block runs fp32, tf32 (on a GPU), fp16 and bf16");
        }
        Ok(())
    }

    /// The call of `phase` at the shape's batch and sequence.
    fn call(&self, phase: Phase) -> Call {
        call(&self.shape, phase)
    }
}

/// The layer of `s`: one Llama layer, its sizes the model layer's [`ModelConfig`].
pub fn layer_config(s: &BlockShape) -> ModelConfig {
    ModelConfig {
        arch: Arch::Llama,
        layers: 1,
        hidden: s.hidden,
        heads: s.heads,
        kv_heads: s.kv_heads(),
        head_dim: s.head_dim,
        mlp: s.mlp,
        vocab: 0,
        context: s.seq + 1,
        rope_theta: s.rope_theta,
        rms_eps: s.rms_eps,
        tied: true,
        local: None,
    }
}

/// The call of `phase` at `s`'s batch and sequence.
fn call(s: &BlockShape, phase: Phase) -> Call {
    Call {
        batch: s.batch as u64,
        seq: s.seq as u64,
        decode: phase == Phase::Decode,
    }
}

/// What must fit: the f32 weights and inputs on the host (and their f64 copy
/// for the reference), and on the device one precision's block with a call's
/// activations (the scores, batch x heads x seq x context, the largest).
pub fn needs(cfg: &Config) -> Vec<Need> {
    let s = &cfg.shape;
    let d = layer_config(s);
    let decode = cfg.call(Phase::Decode);
    let (batch, seq, hidden, kv, mlp) = (
        decode.batch,
        decode.seq,
        d.hidden as u64,
        d.kv_width() as u64,
        d.mlp as u64,
    );
    let params = layer_params(&d);
    // x_prefill, the cache's keys and values, x_decode.
    let inputs = batch * seq * (hidden + 2 * kv) + batch * hidden;
    let host = (params + inputs) * (4 + 8);
    let scores = (batch * s.heads as u64 * seq * decode.context()) * 4;
    // Decode's preallocated cache (seq + 1 positions of keys and values), and
    // the two buffers of a row's ceiling copy (its footprint: at most the
    // prefill's f32 bytes).
    let cache = 2 * batch * decode.context() * kv * 4;
    let prefill = cfg.call(Phase::Prefill);
    let copy = block_bytes(&d, prefill, 4).max(block_bytes(&d, decode, 4));
    let activations = 4 * (batch * seq * (6 * hidden + 3 * mlp)) + 3 * scores + cache + copy;
    let what = format!(
        "the block (--hidden {} --kv-heads {} --mlp {} --seq {} --batch {})",
        s.hidden,
        s.kv_heads(),
        s.mlp,
        s.seq,
        s.batch
    );
    vec![Need {
        what,
        host_bytes: host,
        // A row's block, and the fp32 block held beside the other rows.
        device_bytes: (params + inputs) * 4 * 2 + cache + activations,
    }]
}

/// The fp32 rows' outputs, the tokens checked for accuracy (the first
/// `accuracy_seq` of the prefill, the decode token), in f32 on the host, by
/// name (`y_prefill_fp32`, `y_decode_fp32`): what `--save-output` writes, for
/// the PyTorch twin's check that both blocks compute the same.
pub type Outputs = Vec<(String, Tensor)>;

/// Runs the experiment on `device` with `weights`. A precision that fails in
/// a phase (out of memory, a mode cuBLAS refuses) is that row's, recorded with
/// its error; the others run.
pub fn run(
    device: &Device,
    cfg: &Config,
    weights: &HostWeights,
    telemetry: &Telemetry,
    sizes_note: String,
) -> Result<(BlockResults, Outputs)> {
    let s = &cfg.shape;
    let layer = layer_config(s);
    crate::note!(
        "block: the f64 reference on the CPU ({} tokens)",
        s.accuracy_seq
    );
    let reference = references(weights, s).context("the f64 reference")?;
    let mut phases: Vec<BlockPhase> = cfg
        .phases
        .iter()
        .map(|&phase| BlockPhase {
            phase,
            tokens: cfg.call(phase).tokens() as usize,
            context: cfg.call(phase).context() as usize,
            flops: block_flops(&layer, cfg.call(phase)),
            rows: Vec::new(),
        })
        .collect();
    let mut fused = Vec::new();
    let mut outputs = Outputs::new();
    let ladder = Ladder::new(device, telemetry, cfg.ladder_max)?;
    // The fp32 block, held for the run: every other precision's calls are
    // timed in turn with its calls, so the ratio to fp32 is side by side.
    let fp32_block = match cfg.precisions.contains(&Precision::F32) && cfg.precisions.len() > 1 {
        true => Block::new(weights, s, DType::F32, device)
            .map_err(|e| crate::note!("block: no fp32 block to time beside the rows ({e:#})"))
            .ok(),
        false => None,
    };
    let run = Run {
        cfg,
        weights,
        device,
        telemetry,
        ladder: &ladder,
        reference: &reference,
        fp32_block: fp32_block.as_ref(),
    };
    for &p in &cfg.precisions {
        run.precision(p, &mut phases, &mut outputs, &mut fused);
    }
    for ph in &mut phases {
        fill_vs_fp32(ph);
    }
    let results = BlockResults {
        shape: s.clone(),
        sizes_note,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        seed: cfg.seed,
        params: layer_params(&layer),
        time_source: Some(clock(device)),
        cache_bytes: crate::device::largest_cache(device)?.map(|c| c.bytes),
        copy_ceiling_gb_per_s: None,
        kernels: cfg.kernels,
        phases,
        fused,
        ladder: Some(ladder.finish()),
    };
    Ok((results, outputs))
}

/// What every precision's rows are measured with.
struct Run<'a> {
    cfg: &'a Config,
    weights: &'a HostWeights,
    device: &'a Device,
    telemetry: &'a Telemetry,
    ladder: &'a Ladder<'a>,
    reference: &'a References,
    /// The fp32 block held for the run, when other precisions are timed
    /// beside it.
    fp32_block: Option<&'a Block>,
}

impl Run<'_> {
    /// Precision `p`'s row in every phase (each failed with the error when
    /// its block cannot be built), its outputs kept for fp32, and its fused
    /// ops against their composed forms after a prefill.
    fn precision(
        &self,
        p: Precision,
        phases: &mut [BlockPhase],
        outputs: &mut Outputs,
        fused: &mut Vec<FusedRow>,
    ) {
        let (cfg, telemetry) = (self.cfg, self.telemetry);
        let _mode = GemmMode::set(p);
        let own;
        let block = match (self.fp32_block, p) {
            (Some(b), Precision::F32) => b,
            _ => match Block::new(self.weights, &cfg.shape, p.dtype(), self.device) {
                Ok(b) => {
                    own = b;
                    &own
                }
                Err(e) => {
                    for ph in phases.iter_mut() {
                        ph.rows.push(failed(p, &e));
                    }
                    return;
                }
            },
        };
        let beside = match (self.fp32_block, p) {
            (Some(b), p) if p != Precision::F32 => Some(measure::Fp32Beside {
                block: b,
                mode: &_mode,
                precision: p,
            }),
            _ => None,
        };
        for ph in phases.iter_mut() {
            let r = measure::measure(
                block,
                ph,
                p,
                cfg.kernels,
                cfg.plan,
                telemetry,
                self.ladder,
                self.reference,
                beside.as_ref(),
            );
            ph.rows.push(match r {
                Ok((m, y)) => {
                    if p == Precision::F32 {
                        outputs.push((format!("y_{}_fp32", ph.phase.name()), y));
                    }
                    BlockRow {
                        precision: p,
                        status: RowStatus::Ok,
                        error: None,
                        measured: Some(m),
                    }
                }
                Err(e) => failed(p, &e),
            });
        }
        if cfg.phases.contains(&Phase::Prefill) {
            match parts::fused_rows(block, p, cfg.plan, telemetry) {
                Ok(rows) => fused.extend(rows),
                Err(e) => crate::note!("{p}: fused against composed failed ({e:#})"),
            }
        }
    }
}

fn failed(p: Precision, e: &anyhow::Error) -> BlockRow {
    let why = crate::error::error_line(e);
    crate::note!("block {p}: row failed, recorded with its error ({why})");
    BlockRow {
        precision: p,
        status: RowStatus::Error,
        error: Some(why),
        measured: None,
    }
}

/// The f64 run's outputs on the CPU, composed ops: the first `accuracy_seq`
/// tokens of the prefill (a causal block's first tokens depend on nothing
/// after them, so the block over those alone gives them exactly) and the decode.
struct References {
    prefill: Vec<f64>,
    decode: Vec<f64>,
}

fn references(w: &HostWeights, s: &BlockShape) -> Result<References> {
    let block = Block::new(w, s, DType::F64, &Device::Cpu)?;
    let k = s.accuracy_seq;
    let x = block.x_prefill.narrow(1, 0, k)?;
    let aux = block.aux(Phase::Prefill, k, DType::F64)?;
    let prefill = flat(&block.forward(&x, Phase::Prefill, &aux, None, Kernels::Composed)?)?;
    let aux = block.aux(Phase::Decode, 1, DType::F64)?;
    let mut cache = block.decode_cache()?;
    let decode = block.forward(
        &block.x_decode,
        Phase::Decode,
        &aux,
        Some(&mut cache),
        Kernels::Composed,
    )?;
    Ok(References {
        prefill,
        decode: flat(&decode)?,
    })
}

fn flat(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f64>()?)
}

/// The clock a block run's times and rates come from on `device`: the one
/// [`crate::schema::Timed::rate_ms`] picks, CUDA events on a GPU (the device's
/// own time for the work), the wall clock on the CPU.
fn clock(device: &Device) -> TimeSource {
    if device.is_cuda() {
        TimeSource::GpuMedianMs
    } else {
        TimeSource::MedianMs
    }
}

/// The matmul classes' time in a measured row (the rates' time source).
fn matmul_ms(m: &BlockMeasured) -> f64 {
    m.parts
        .iter()
        .filter(|x| x.class.is_matmul())
        .map(|x| x.timed.rate_ms().0)
        .sum()
}

/// Each row against the phase's fp32 row: end to end, matmuls alone, and
/// Amdahl's prediction from fp32's matmul share and the matmul-only speedup.
pub fn fill_vs_fp32(ph: &mut BlockPhase) {
    let Some(fp32) = ph
        .rows
        .iter()
        .find(|r| r.precision == Precision::F32)
        .and_then(|r| r.measured.clone())
    else {
        return;
    };
    for m in ph.rows.iter_mut().filter_map(|r| r.measured.as_mut()) {
        let s = matmul_ms(&fp32) / matmul_ms(m);
        // End to end: against the fp32 calls timed in turn with the row's
        // where it has them, else fp32's own row.
        let base = m.fp32_beside.as_ref().unwrap_or(&fp32.end_to_end);
        m.speedup_vs_fp32 = Some(base.rate_ms().0 / m.end_to_end.rate_ms().0);
        m.speedup_vs_fp32_interval = m.fp32_beside.as_ref().and_then(|b| {
            crate::schema::RatioInterval::of(m.end_to_end.samples_ms(), b.samples_ms())
        });
        m.matmul_speedup_vs_fp32 = Some(s);
        m.amdahl_speedup_vs_fp32 = Some(amdahl(fp32.matmul_share, s));
    }
}
