//! The `generate` experiment's core: a whole model (any architecture the
//! model layer runs, [`crate::model`]) generating text per precision. The
//! weights come from a checked GGUF file or are random at a named shape; the
//! file's own tokenizer and chat template turn the prompt into ids. A row is
//! candle-transformers' quantized model of the architecture, or the suite's
//! decoder on its kernels, at the file's stored types, requantized to one
//! block type or one of llama.cpp's mixtures, or at fp32, tf32, fp16 or
//! bf16. Per row ([`measure`]): the greedy answer, time to first token,
//! prompt processing and generation as llama-bench measures them, peak
//! memory, weight bytes, generation against its bandwidth bound, prompt
//! processing against the matmuls alone, and where a token's time goes
//! ([`parts`]).

mod group;

mod measure;
mod parts;
mod rows;

use anyhow::Result;
use candle_core::Device;

pub use crate::bench::lm::{
    model_info, needs, needs_f32, random_ids, rows, setup, Config, DtypeArg, RowKind,
};
use crate::schema::GenerateResults;
use crate::telemetry::Telemetry;

/// Runs every model's rows on `device`, one model after another, `on_row`
/// given the results so far after each row but the last (the program saves
/// them: a run stopped midway keeps its finished rows). A row that fails (out
/// of memory, a type the device lacks) is that row's, recorded with its
/// error; the others run.
pub fn run(
    device: &Device,
    runs: &[setup::Prepared],
    telemetry: &Telemetry,
    on_row: &mut dyn FnMut(&GenerateResults) -> Result<()>,
) -> Result<GenerateResults> {
    rows::run(device, runs, telemetry, on_row)
}

/// The run's weights and every row's model made and loaded, each timed, and
/// nothing measured (`--prepare-only`): a result without rows whose notes
/// give the times.
pub fn prepare_only(device: &Device, runs: &[setup::Prepared]) -> Result<GenerateResults> {
    rows::prepare_only(device, runs)
}
