//! The body of `generate`: a whole model (a real GGUF file of an architecture
//! the suite runs, or random weights at a named shape) generating text per
//! precision, and any further models the run measured, each a body of its
//! own (`more_models`): its
//! greedy answer, prompt processing (pp) and generation (tg) tokens/s as
//! llama-bench reports them, time to first token, peak memory and weight bytes,
//! generation against the bound that reading every weight once per token sets
//! at the copy bandwidth measured in the same run, prompt processing against
//! the model's matmuls alone, the speedups over fp32, and where a generated
//! token's time goes by op class.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::model::{ModelInfo, WeightSource};
use super::rows::{Clock, Pairing, TimedRow, Timing};
use super::{Bound, KernelChoice, Ladder, LaunchRow, RatioInterval, RowStatus, Timed};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GenerateResults {
    pub model: ModelInfo,
    pub prompt: PromptInfo,
    /// Prompt processing's length: tokens of one pp test (llama-bench's `-p`).
    pub pp_tokens: usize,
    /// Generation's length: tokens of one tg test (llama-bench's `-n`), and of
    /// the greedy answer.
    pub tg_tokens: usize,
    pub warmup: usize,
    pub iters: usize,
    /// Seed of the random weights (random-weight shapes) and of the parts'
    /// random inputs.
    pub seed: u64,
    /// The bandwidth past the caches, measured in this run (GB/s, 10^9 bytes
    /// per second): before 2.4 a plain device copy over `copy_bytes`, the
    /// one bandwidth tg's bound used; from 2.4 the ladder's read at memory's
    /// footprint (`copy_bytes`) on the pool's threads, the DRAM bound's:
    /// its first reading in files from before a9e5e40's successor, since
    /// then the fastest of the ladder's reads at memory's footprint or more
    /// when the file was written (where it was read: `copy_bytes`).
    pub copy_gb_per_s: Option<f64>,
    pub copy_bytes: u64,
    /// The bandwidth ladder's points the rows were held against (2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
    /// What one op costs the host on this device, measured in this run as
    /// `overhead`'s queued one-element add (2.14): the unit of each row's
    /// `host_floor_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_cost: Option<LaunchRow>,
    /// Whose kernels the rows ran with (`--kernels`; absent before
    /// 2.3's generate had it: candle's). `both`: each row, then the same
    /// precision again with the suite's, its own row.
    #[serde(default)]
    pub kernels: KernelChoice,
    pub rows: Vec<GenerateRow>,
    /// What the run could not measure, and why (kernel launches on a GPU).
    pub notes: Vec<String>,
    /// The further models the run measured with the same flags (`--model
    /// A,B`), each a body of its own (2.9; none before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_models: Vec<GenerateResults>,
}

impl GenerateResults {
    /// This body and every further model's, in the order they ran.
    pub fn models(&self) -> Vec<&GenerateResults> {
        let mut out = vec![self];
        out.extend(self.more_models.iter().flat_map(|m| m.models()));
        out
    }
}

/// How a row run with the suite's kernels is named: "fp32 (lab kernels)",
/// "q4_1 (stored) (lab kernels)".
pub const LAB_SUFFIX: &str = " (lab kernels)";

/// The prompt every precision answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromptInfo {
    /// The user's message (`--prompt`); null for random weights, which are fed
    /// token ids directly.
    pub user: Option<String>,
    /// The message as the file's chat template formats it, with the generation
    /// prompt (transformers' `apply_chat_template(..., add_generation_prompt=True)`).
    pub formatted: Option<String>,
    /// Which template formatted it: the file's chat template, a fallback of
    /// the architecture's where the file has none (Gemma's turn format), or
    /// none (the message as written); null for random weights (2.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The formatted prompt's token ids, as the file's tokenizer gives them.
    pub token_ids: Vec<u32>,
}

/// One precision: measured, or failed with its error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GenerateRow {
    /// "q4_1 (stored)", "q8_0", "fp32", "tf32", "fp16", "bf16"; a float
    /// row with the suite's kernels "fp32 (lab kernels)".
    pub precision: String,
    pub path: ModelPath,
    /// candle (candle-nn's RMSNorm and softmax, Candle's SwiGLU and adds) or
    /// lab (the suite's own, `candle_lab::kernels`; its rotary embedding too, on the CPU).
    /// A quantized row with candle's is candle-transformers' quantized model;
    /// with the lab's, the suite's decoder on the suite's quantized kernels.
    #[serde(default)]
    pub kernels: KernelChoice,
    pub status: RowStatus,
    pub error: Option<String>,
    pub measured: Option<GenerateMeasured>,
}

/// Which model code ran the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelPath {
    /// GGUF blocks as stored: candle-transformers' quantized model of the
    /// architecture (QMatMul) with Candle's kernels; with the suite's, the
    /// model layer's decoder on the suite's quantized kernels
    /// (`kernels::QLinear`).
    Quantized,
    /// The model layer's decoder (`model::decoder`) on dequantized weights.
    Float,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GenerateMeasured {
    /// The greedy answer to the prompt.
    pub answer: Answer,
    /// Time to first token: the formatted prompt through the model from an
    /// empty cache, and the first token picked.
    pub ttft: Timed,
    /// One pp test: `pp_tokens` tokens in one forward pass from an empty cache.
    pub pp: Timed,
    pub pp_tokens_per_s: f64,
    /// tokens/s of the slowest and fastest pp sample.
    pub pp_tokens_per_s_min: f64,
    pub pp_tokens_per_s_max: f64,
    /// One tg test: `tg_tokens` tokens, one forward pass each, from an empty
    /// cache, each next token picked greedily from the last one's logits.
    pub tg: Timed,
    pub tg_tokens_per_s: f64,
    pub tg_tokens_per_s_min: f64,
    pub tg_tokens_per_s_max: f64,
    /// Bytes the row's weights hold in memory (as the model holds them).
    pub weight_bytes: u64,
    /// Bytes of weights one generated token reads: every projection and the
    /// output head once, the norms, one embedding row.
    pub weight_bytes_per_token: u64,
    /// The bandwidth over weight_bytes_per_token: the tokens/s generation
    /// could reach if reading the weights were all it did (null without a
    /// bandwidth). From 2.4 the ladder's read at the weights' own footprint
    /// with up to the pool's threads (`tg_bound`: the level they live in, an
    /// LLC bound where they fit in the last cache); before it, a plain copy.
    pub tg_bound_tokens_per_s: Option<f64>,
    /// tg_tokens_per_s as a percentage of the bound.
    pub tg_pct_of_bound: Option<f64>,
    /// The ladder's point the bound reads (2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tg_bound: Option<Bound>,
    /// The same bound at the ladder's read past the caches (DRAM), where the
    /// weights fit in a cache and `tg_bound` is that cache's (2.4): the
    /// fastest read past the caches measured when the row was bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tg_bound_dram_tokens_per_s: Option<f64>,
    /// FLOPs of one pp test (2 per multiply-add, matmuls and attention).
    pub pp_flops: f64,
    pub pp_gflop_per_s: f64,
    /// The model's matmuls alone at pp's shapes (every projection and the
    /// output head, `pp_tokens` rows): the roofline pp is held against.
    pub matmuls_pp: Timed,
    pub matmuls_pp_gflop_per_s: f64,
    /// pp_gflop_per_s as a percentage of matmuls_pp_gflop_per_s: the pass
    /// against its own matmuls timed alone (not a roofline; the name before
    /// 2.4 was `pp_pct_of_matmul_roofline`).
    #[serde(alias = "pp_pct_of_matmul_roofline")]
    pub pp_vs_matmuls_alone_pct: f64,
    /// The roofline pp is held against (2.4): min(the GEMM peak measured in
    /// this run at the row's precision on the pool's threads, the pass's
    /// arithmetic intensity (its FLOPs over its weights' bytes, read once) x
    /// `tg_bound`'s bandwidth), and which of the two it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp_roofline: Option<PpRoofline>,
    /// The same matmuls at one token (tg's shapes).
    pub matmuls_tg: Timed,
    /// Peak memory during the row (model load excluded) above the use before
    /// it; null where the device cannot say.
    pub peak_bytes: Option<u64>,
    /// Where a generated token's time goes, per token: each op class timed
    /// inside the real decode steps (`parts_in_pass`; spans around the ops of
    /// tg runs of their own, apart from the clean ones), or alone at tg's
    /// shapes (candle-transformers' model, which has no seam for spans).
    pub parts: Vec<TokenPart>,
    /// The parts' sum; null where the op classes were not timed (no parts: the
    /// transformers peer, whose model is its own code).
    pub parts_sum_ms: Option<f64>,
    /// The parts were timed inside the pass (2.4; before it, alone).
    #[serde(default)]
    pub parts_in_pass: bool,
    /// The token's time outside the parts: the spanned token's time less its
    /// spans (in the pass), or the clean token's less the parts timed alone
    /// (negative when parts timed alone on warm inputs sum past it) (2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts_remainder_ms: Option<f64>,
    /// What the spans cost: the spanned token's time less the clean one's (2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts_overhead_ms: Option<f64>,
    /// Ops a generated token issues (2.14): the calls of its parts, counted
    /// in the decode steps for the suite's decoder, as candle-transformers'
    /// model makes them (`parts::token_parts`) for its rows; on a GPU each
    /// op one kernel launch or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_per_token: Option<usize>,
    /// The host's floor under a token (2.14): `ops_per_token` x the run's
    /// cost of one op (`op_cost`), the least a token takes however fast the
    /// device; where it exceeds the bandwidth's, `held_back_by` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_floor_ms: Option<f64>,
    /// The suite's kernels' hand-offs to the CPU pool a generated token
    /// (2.14): tg's samples' (`Availability::hand_offs`) over their tokens;
    /// null where there were none (Candle's kernels), and on a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_offs_per_token: Option<f64>,
    /// Where the row reaches under half its bound: the op class that holds it
    /// back, and why (null otherwise); first, where the host floor is over
    /// the time reading the weights at the bound takes, the ops.
    pub held_back_by: Option<String>,
    pub vs_fp32: Option<VsFp32>,
    /// The fp32 model's pp and tg tests timed in turn with this row's (2.5):
    /// what `vs_fp32`'s pp and tg ratios divide, side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp32_beside: Option<Fp32Beside>,
}

/// The fp32 reference timed in turn with a row (A R A R ...): a second copy
/// of the fp32 model, held for the run, on the row's kernels where the run
/// has both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fp32Beside {
    /// The fp32 row it is a copy of ("fp32", "fp32 (lab kernels)").
    pub against: String,
    pub pp: Timed,
    pub tg: Timed,
}

/// A roofline's value for one pass: the attainable GFLOP/s and what bounds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PpRoofline {
    /// The compute peak: a square matmul of `gemm_size` at `gemm_precision`
    /// on the pool's threads, in this run; for a quantized row (2.8) its own
    /// product, 64 rows by a square weight, "q4_1 (the suite's QLinear)"
    /// (fp32's GEMM before); from 2.12 a row on Candle's kernels takes the
    /// suite's product of its type where that is faster (the machine's
    /// best, so a slow kernel reads as slow), and this names which ran.
    pub gemm_peak_gflop_per_s: f64,
    pub gemm_size: usize,
    pub gemm_precision: String,
    /// The pass's FLOPs over the bytes it must read.
    pub flop_per_byte: f64,
    /// min(gemm peak, flop_per_byte x the bandwidth); from 2.8 the compute
    /// side is the row's matmuls alone at pp's shapes where those ran faster
    /// than the square product.
    pub attainable_gflop_per_s: f64,
    /// "compute" (the GEMM peak), "compute (its matmuls alone at pp's
    /// shapes)" (2.8) or "memory" (intensity x bandwidth).
    pub bound_by: String,
    /// The achieved GFLOP/s as a percentage of attainable_gflop_per_s.
    pub pct: f64,
}

/// The greedy answer one precision gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Answer {
    pub token_ids: Vec<u32>,
    /// The ids decoded; null for random weights.
    pub text: Option<String>,
    /// The first index where the ids differ from fp32's (null: the same, or
    /// no fp32 row).
    pub differs_from_fp32_at: Option<usize>,
    /// The model ended its answer (an end-of-sequence token) before
    /// `tg_tokens`.
    pub stopped_at_eos: bool,
}

/// The speedup over the fp32 row (fp32's median time over this row's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VsFp32 {
    /// The fp32 row this one is held against: the fp32 of the same kernels
    /// ("fp32", or "fp32 (lab kernels)" for a lab row), else the other one's.
    /// Absent before `--kernels`: "fp32".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// The matmuls alone, at pp's shapes.
    pub matmuls_pp: f64,
    /// The matmuls alone, at tg's shapes.
    pub matmuls_tg: f64,
    pub pp: f64,
    pub tg: f64,
    /// pp and tg measured side by side with the fp32 model (its tests in
    /// turn with the row's: `fp32_beside`, 2.5); false: fp32's own row,
    /// measured at another moment.
    #[serde(default)]
    pub side_by_side: bool,
    /// The 95% bootstrap intervals of `pp` and `tg` (2.5; null under 3
    /// samples a side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pp_interval: Option<RatioInterval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tg_interval: Option<RatioInterval>,
}

/// One op class's share of a generated token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenPart {
    pub class: TokenOpClass,
    /// Calls of the class per token (all layers).
    pub calls: usize,
    /// The class's time per token: its median per layer times the layers.
    pub ms_per_token: f64,
    /// The timed sample behind it (one layer's calls, or the head's).
    pub timed: Timed,
}

/// A generated token's operations by class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenOpClass {
    /// Q, K, V, O, gate, up, down in every layer, and the output head.
    Matmuls,
    /// Q K^T, the softmax and the weights times V over the cache.
    Attention,
    /// The RMSNorms (two per layer and the final one).
    Norms,
    /// Rotary embedding of Q and K.
    Rotary,
    /// Residual adds, SiLU and the gate's product, the scale, the copies that
    /// lay heads out and the cache's append, the embedding row.
    Elementwise,
    /// Picking the next token: argmax over the vocabulary, read to the host.
    Sampling,
}

impl TokenOpClass {
    pub const ALL: [TokenOpClass; 6] = [
        Self::Matmuls,
        Self::Attention,
        Self::Norms,
        Self::Rotary,
        Self::Elementwise,
        Self::Sampling,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Matmuls => "matmuls",
            Self::Attention => "attention",
            Self::Norms => "norms",
            Self::Rotary => "rotary",
            Self::Elementwise => "element-wise",
            Self::Sampling => "sampling",
        }
    }
}

impl super::rows::Rows for GenerateResults {
    /// Every row, a failure named by its precision, with two clocks: pp and
    /// tg ("pp fp32"). Each pairs as its own experiment, named with the
    /// model (its file, or the random weights' shape) and sized by its
    /// tokens, so that a PyTorch twin's fp32 tg on the same file pairs with
    /// Candle's, and two models never pair.
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let mut rows = self.own_timed_rows(None);
        for m in self.more_models.iter().flat_map(|m| m.models()) {
            rows.extend(m.own_timed_rows(Some(m.model.key())));
        }
        rows
    }

    fn validate(&self) -> Result<()> {
        let mut keys = Vec::new();
        for m in self.models() {
            m.validate_one()?;
            if keys.contains(&m.model.key()) {
                bail!("generate: the model {} is in the file twice", m.model.key());
            }
            keys.push(m.model.key());
        }
        Ok(())
    }
}

impl GenerateResults {
    /// This model's rows (not its further models'), each named by its
    /// precision, after `prefix` (a further model's key) where given.
    fn own_timed_rows(&self, prefix: Option<&str>) -> Vec<TimedRow<'_>> {
        let model = self.model.key();
        let named = |p: &str| match prefix {
            Some(m) => format!("{m}: {p}"),
            None => p.to_string(),
        };
        let rows = self.rows.iter().map(|row| {
            let parts = row
                .measured
                .as_ref()
                .map(|m| [("pp", self.pp_tokens, &m.pp), ("tg", self.tg_tokens, &m.tg)]);
            let parts = parts.into_iter().flatten();
            let timings = parts
                .clone()
                .map(|(what, _, t)| Timing::new(format!("{what} {}", row.precision), Clock::of(t)));
            let pairs = parts.map(|(what, tokens, t)| Pairing {
                experiment: format!("generate {what} {model}"),
                size: tokens as u64,
                precision: row.precision.clone(),
                stands_for: row.precision.strip_suffix(LAB_SUFFIX).map(str::to_string),
                device: None,
                clock: Clock::of(t),
                calls_per_sample: 1,
            });
            let (timings, pairs) = (timings.collect(), pairs.collect());
            let tg_pct = row.measured.as_ref().and_then(|m| m.tg_pct_of_bound);
            TimedRow::ran(
                named(&row.precision),
                row.status,
                timings,
                pairs,
                row.measured.is_some(),
            )
            .bounded(format!("generate {} tg", named(&row.precision)), tg_pct)
        });
        rows.collect()
    }

    /// What the types cannot say of this model's own body.
    fn validate_one(&self) -> Result<()> {
        let m = &self.model;
        if m.heads == 0 || m.kv_heads == 0 || !m.heads.is_multiple_of(m.kv_heads) {
            bail!(
                "generate: {} heads are not a multiple of {} key/value heads",
                m.heads,
                m.kv_heads
            );
        }
        if (m.source == WeightSource::File) != m.file.is_some() {
            bail!("generate: a file's rows name it, random weights name none");
        }
        for row in &self.rows {
            match (row.status, &row.measured, &row.error) {
                (RowStatus::Ok, Some(_), None) | (RowStatus::Error, None, Some(_)) => {}
                _ => bail!(
                    "generate {}: status {:?} disagrees with its measurements and error",
                    row.precision,
                    row.status
                ),
            }
        }
        Ok(())
    }
}

/// The largest share of a clean token the spans may add before a row's
/// parts stop being shown as shares: past it the spanned pass is another
/// run than the one timed (on a GPU each span's two synchronizations cost an
/// op its launch latency: the H200's first run spanned 7.57 ms against a
/// 3.79 ms token), and its shares would describe that run.
pub const SPANS_MAX_SHARE: f64 = 0.10;

/// Why a row's parts are not shown as shares, where the spans added more
/// than [`SPANS_MAX_SHARE`] of the clean token (`overhead_ms` over
/// `token_ms`); `None` where they may be.
pub fn spans_too_costly(overhead_ms: Option<f64>, token_ms: f64) -> Option<String> {
    let o = overhead_ms?;
    (o > SPANS_MAX_SHARE * token_ms).then(|| {
        format!(
            "the parts' spans added {o:.2} ms to the {token_ms:.2} ms token ({:.0}%, over \
             {:.0}%): their shares would describe another run",
            100.0 * o / token_ms,
            100.0 * SPANS_MAX_SHARE
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_whose_spans_cost_over_a_tenth_of_the_token_are_not_shares() {
        // The H200's first run: 7.57 ms spanned against a 3.79 ms token.
        let why = spans_too_costly(Some(7.57 - 3.79), 3.79).unwrap();
        assert!(why.starts_with("the parts' spans added 3.78 ms"), "{why}");
        assert!(why.contains("(100%, over 10%)"), "{why}");
        // The Xeon VM's: 0.14 ms over 3.12 ms (4%); none timed in the pass.
        assert_eq!(spans_too_costly(Some(0.14), 3.12), None);
        assert_eq!(spans_too_costly(Some(0.30), 3.0), None);
        assert!(spans_too_costly(Some(0.31), 3.0).is_some());
        assert_eq!(spans_too_costly(None, 3.0), None);
    }
}
