//! A quantized row's tensors: the file's as stored, or requantized to one
//! block type or to one of llama.cpp's mixtures ([`Quant`]: Q4_K_M, Q5_K_M...,
//! each tensor's type chosen by llama.cpp's own rules, [`mix_types`]), and
//! the row's GGUF made once ([`Gguf::of`]): the file itself, or every tensor
//! quantized (dequantized to f32, then `QTensor::quantize` to its type) into
//! a GGUF written in memory (`gguf_file::write`), which candle-transformers'
//! model and the row's matmuls alone both read.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use rayon::prelude::*;

use super::arch::ReadSeek;
use super::gguf::check::model_metadata;
use super::gguf::{open_regular, read, type_name};
use super::weights::{Source, Weights};
use super::Config;
use crate::error::contained;

/// What a quantized row's weights are: the file as stored, every 2-D weight
/// in one block type, or a mixture of llama.cpp's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quant {
    Stored,
    Type(GgmlDType),
    Mix(Mix),
}

/// llama.cpp's mixtures (`llama_ftype`), as `llama-quantize` writes them.
/// (Its "Q2_K" is a mixture too, of Q2_K, Q3_K, Q4_K and Q6_K tensors; here
/// `q2_k` stays every weight in Q2_K, and [`Mix::Q2K`] is its mixture.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    Q2K,
    Q3KM,
    Q4KM,
    Q5KM,
}

impl Mix {
    pub const ALL: [Mix; 4] = [Mix::Q2K, Mix::Q3KM, Mix::Q4KM, Mix::Q5KM];

    /// The name `--dtypes` takes ("q4_k_m"; llama.cpp's "Q2_K" is "q2_k_mix").
    pub fn name(self) -> &'static str {
        match self {
            Mix::Q2K => "q2_k_mix",
            Mix::Q3KM => "q3_k_m",
            Mix::Q4KM => "q4_k_m",
            Mix::Q5KM => "q5_k_m",
        }
    }

    /// The type its tensors take unless a rule says otherwise.
    fn base(self) -> GgmlDType {
        match self {
            Mix::Q2K => GgmlDType::Q2K,
            Mix::Q3KM => GgmlDType::Q3K,
            Mix::Q4KM => GgmlDType::Q4K,
            Mix::Q5KM => GgmlDType::Q5K,
        }
    }
}

/// The block type holding most of the layers' projection bytes in `types`:
/// a mixed row's main type (its compute peak's).
pub fn main_type(d: &Config, types: &HashMap<String, GgmlDType>) -> GgmlDType {
    let mut by: Vec<(GgmlDType, u64)> = Vec::new();
    for l in 0..d.layers {
        for (name, (r, c)) in super::layer_matmul_names(l).iter().zip(d.layer_matmuls()) {
            let Some(&t) = types.get(name) else { continue };
            let bytes = super::gguf::tensor_bytes(t, r * c);
            match by.iter_mut().find(|(x, _)| *x == t) {
                Some(e) => e.1 += bytes,
                None => by.push((t, bytes)),
            }
        }
    }
    by.into_iter()
        .max_by_key(|(_, b)| *b)
        .map_or(GgmlDType::F32, |(t, _)| t)
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers, and
/// every third between, get more bits in the mixtures that say so.
fn more_bits(i: usize, n: usize) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64).rem_euclid(3) == 2
}

/// The type llama.cpp's fallback gives a tensor whose rows of `cols` values
/// do not hold whole blocks of `t` (`tensor_type_fallback`): a 32-value type
/// (F16 where even that does not divide).
fn fallback(t: GgmlDType, cols: usize) -> GgmlDType {
    if cols.is_multiple_of(t.block_size()) {
        return t;
    }
    let f = match t {
        GgmlDType::Q2K | GgmlDType::Q3K => GgmlDType::Q4_0,
        GgmlDType::Q4K => GgmlDType::Q5_0,
        GgmlDType::Q5K => GgmlDType::Q5_1,
        GgmlDType::Q6K => GgmlDType::Q8_0,
        other => other,
    };
    match cols.is_multiple_of(f.block_size()) {
        true => f,
        false => GgmlDType::F16,
    }
}

/// Each tensor's type in llama.cpp's mixture `mix` of a model of `d`, as
/// `llama-quantize` chooses it (llama.cpp's llama-quant.cpp,
/// `llama_tensor_get_type_impl` and `tensor_type_fallback`, for the
/// architectures here: no experts, not Falcon, not 70B): vectors stay f32;
/// the output head (the embedding when tied) Q6_K, or Q8_0 where its rows
/// do not hold 256-value blocks; attn_v and ffn_down with more bits in some
/// layers ([`more_bits`]); then every type its rows cannot hold falls back.
pub fn mix_types(d: &Config, mix: Mix) -> HashMap<String, GgmlDType> {
    use GgmlDType::*;
    let n = d.layers;
    let gqa = d.groups();
    let mut out = HashMap::new();
    for (name, shape) in d.tensors() {
        let [_, cols] = shape[..] else {
            out.insert(name, F32);
            continue;
        };
        let base = mix.base();
        let layer = || -> usize {
            let rest = name.trim_start_matches("blk.");
            rest.split('.')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        };
        let t = if name == "output.weight" || (d.tied && name == "token_embd.weight") {
            match cols.is_multiple_of(base.block_size()) {
                true => Q6K,
                false => Q8_0,
            }
        } else if name.contains("attn_v.weight") {
            match mix {
                Mix::Q2K if gqa >= 4 => Q4K,
                Mix::Q2K => Q3K,
                Mix::Q3KM if layer() < 2 => Q5K,
                Mix::Q3KM => Q4K,
                Mix::Q4KM | Mix::Q5KM if more_bits(layer(), n) => Q6K,
                _ => base,
            }
        } else if name.contains("ffn_down") {
            match mix {
                Mix::Q2K => Q3K,
                Mix::Q3KM if layer() < n / 16 => Q5K,
                Mix::Q3KM => Q4K,
                Mix::Q4KM | Mix::Q5KM if more_bits(layer(), n) => Q6K,
                _ => base,
            }
        } else if name.contains("attn_output.weight") {
            match mix {
                Mix::Q2K => Q3K,
                Mix::Q3KM => Q4K,
                _ => base,
            }
        } else {
            base
        };
        out.insert(name, fallback(t, cols));
    }
    out
}

/// The type each tensor has in a row of `quant` from `source`: as stored,
/// or every 2-D weight in one type (the vectors f32), or a mixture's.
pub fn row_types(source: &Source, quant: Quant) -> Result<HashMap<String, GgmlDType>> {
    let d = source.config();
    let mut out = HashMap::new();
    for (name, shape) in d.tensors() {
        let t = match (source, quant) {
            (Source::File(f), Quant::Stored) => {
                f.gguf
                    .tensor(&name)
                    .with_context(|| format!("no tensor {name}"))?
                    .dtype
            }
            (Source::Random { .. }, Quant::Stored) => match shape.len() {
                2 => GgmlDType::Q4_1,
                _ => GgmlDType::F32,
            },
            (_, Quant::Mix(m)) => return Ok(mix_types(d, m)),
            (_, Quant::Type(t)) if shape.len() == 2 => t,
            _ => GgmlDType::F32,
        };
        out.insert(name, t);
    }
    Ok(out)
}

/// Whether `target` can hold every weight of `d`: its blocks must divide each
/// row (32 values for Q4_0..Q8_0, 256 for the k-quants).
pub fn check_target(d: &Config, target: GgmlDType) -> Result<()> {
    // candle's CPU dot products for Q4_1, Q5_0 and Q5_1 take blocks in pairs.
    let pairs = matches!(target, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1);
    let block = target.block_size() * if pairs { 2 } else { 1 };
    let widths = [d.hidden, d.mlp, d.q_width()];
    if let Some(w) = widths.iter().find(|w| !w.is_multiple_of(block)) {
        bail!(
            "--dtypes {}: its kernels take rows in blocks of {block} values, and the model's rows \
             of {w} are not a multiple of that (a mixture such as q4_k_m falls back per tensor)",
            type_name(target).to_lowercase()
        );
    }
    Ok(())
}

/// The tensor `name` as the row holds it, on the host: a file's own blocks
/// where the row keeps its stored type, else the f32 weights quantized.
pub fn row_tensor(
    weights: &Weights,
    types: &HashMap<String, GgmlDType>,
    name: &str,
) -> Result<QTensor> {
    let t = *types
        .get(name)
        .with_context(|| format!("no tensor {name}"))?;
    if let Source::File(f) = weights.source() {
        if f.gguf.tensor(name).map(|i| i.dtype) == Some(t) {
            return weights.source().stored(name);
        }
    }
    let f = weights.f32(name)?;
    QTensor::quantize(&f, t).with_context(|| format!("quantizing {name} to {}", type_name(t)))
}

/// A row's weights as GGUF bytes in memory, every tensor quantized on all
/// cores (each alone: the threads change no value).
fn gguf_bytes(weights: &Weights, types: &HashMap<String, GgmlDType>) -> Result<Vec<u8>> {
    let d = weights.config();
    let tensors = d
        .tensors()
        .into_par_iter()
        .map(|(name, _)| {
            let t = row_tensor(weights, types, &name)?;
            Ok((name, t))
        })
        .collect::<Result<Vec<_>>>()?;
    let md = model_metadata(d);
    let md: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md, &ts).context("writing the requantized GGUF in memory")?;
    Ok(out.into_inner())
}

/// One quantized row's weights as a GGUF, made once: the file itself where
/// the row is as stored, else every tensor quantized into a GGUF held in
/// memory. candle-transformers' model and the row's matmuls alone both read
/// it, through the suite's checked structure ([`read`]) with the checked
/// sizes as the metadata candle-transformers reads (never the file's own).
pub enum Gguf {
    File(PathBuf, Box<read::Gguf>, Config),
    Memory(Vec<u8>, Config),
}

impl Gguf {
    /// The row of `quant` from `weights`.
    pub fn of(weights: &Weights, quant: Quant) -> Result<Self> {
        match (weights.source(), quant) {
            (Source::File(f), Quant::Stored) => Ok(Self::File(
                f.path.clone(),
                Box::new(f.gguf.clone()),
                f.config.clone(),
            )),
            _ => Ok(Self::Memory(
                gguf_bytes(weights, &row_types(weights.source(), quant)?)?,
                weights.config().clone(),
            )),
        }
    }

    /// Its bytes, when it is held in memory.
    pub fn bytes_in_memory(&self) -> usize {
        match self {
            Self::File(..) => 0,
            Self::Memory(b, _) => b.len(),
        }
    }

    pub fn config(&self) -> &Config {
        match self {
            Self::File(_, _, d) | Self::Memory(_, d) => d,
        }
    }

    /// `f` on the GGUF's header and a reader at its start.
    pub fn read<T>(&self, f: impl FnOnce(Content, &mut dyn ReadSeek) -> Result<T>) -> Result<T> {
        // candle's and candle-transformers' readers are handed what the
        // suite checked; anything they still trip on is one line.
        match self {
            Self::File(path, g, d) => {
                let (file, _) = open_regular(path)?;
                let content = g.to_candle(model_metadata(d));
                contained("reading the model (candle)", || {
                    f(content, &mut std::io::BufReader::new(file))
                })
            }
            Self::Memory(bytes, d) => {
                let mut r = Cursor::new(bytes.as_slice());
                let content = read::read(&mut r, bytes.len() as u64)?.to_candle(model_metadata(d));
                contained("reading the requantized model (candle)", || {
                    f(content, &mut r)
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::tests::{gemma3_270m, smollm2};
    use std::collections::BTreeMap;

    fn counts(types: &HashMap<String, GgmlDType>) -> BTreeMap<String, usize> {
        let mut c = BTreeMap::new();
        for t in types.values() {
            *c.entry(type_name(*t)).or_insert(0) += 1;
        }
        c
    }

    #[test]
    fn q4_k_m_gives_gemma3s_file_its_own_types() {
        // The published gemma-3-270m Q4_K_M holds Q5_0 (81), Q4_K (27),
        // Q8_0 (10), Q6_K (9) and F32 (109) tensors.
        let t = mix_types(&gemma3_270m(), Mix::Q4KM);
        let want: BTreeMap<String, usize> = [
            ("F32", 109),
            ("Q4_K", 27),
            ("Q5_0", 81),
            ("Q6_K", 9),
            ("Q8_0", 10),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .into();
        assert_eq!(counts(&t), want);
        // Layer 0's attn_v has more bits (Q6_K, rows of 640: Q8_0), layer 2's not.
        assert_eq!(t["blk.0.attn_v.weight"], GgmlDType::Q8_0);
        assert_eq!(t["blk.2.attn_v.weight"], GgmlDType::Q5_0);
        assert_eq!(t["blk.0.ffn_down.weight"], GgmlDType::Q6K);
        assert_eq!(t["blk.2.ffn_down.weight"], GgmlDType::Q4K);
        assert_eq!(t["blk.2.attn_output.weight"], GgmlDType::Q4K);
        assert_eq!(t["token_embd.weight"], GgmlDType::Q8_0);
    }

    #[test]
    fn smollm2s_rows_of_576_fall_back_as_llama_cpps_do() {
        let d = smollm2();
        let t = mix_types(&d, Mix::Q4KM);
        // 576 is not a multiple of 256: Q4_K -> Q5_0, Q6_K -> Q8_0; ffn_down
        // reads 1536 (6 blocks) and keeps its k-quants.
        assert_eq!(t["blk.5.attn_q.weight"], GgmlDType::Q5_0);
        assert_eq!(t["blk.0.attn_v.weight"], GgmlDType::Q8_0);
        assert_eq!(t["blk.0.ffn_down.weight"], GgmlDType::Q6K);
        assert_eq!(t["blk.4.ffn_down.weight"], GgmlDType::Q4K);
        let t = mix_types(&d, Mix::Q5KM);
        assert_eq!(t["blk.5.ffn_gate.weight"], GgmlDType::Q5_1);
        assert_eq!(t["blk.4.ffn_down.weight"], GgmlDType::Q5K);
        // Q2_K and Q3_K fall back to Q4_0.
        let t = mix_types(&d, Mix::Q3KM);
        assert_eq!(t["blk.5.ffn_up.weight"], GgmlDType::Q4_0);
        // ffn_down: Q5_K in the first sixteenth of the layers, Q4_K after.
        assert_eq!(t["blk.0.ffn_down.weight"], GgmlDType::Q5K);
        assert_eq!(t["blk.1.ffn_down.weight"], GgmlDType::Q4K);
        let t = mix_types(&d, Mix::Q2K);
        assert_eq!(t["blk.3.ffn_down.weight"], GgmlDType::Q3K);
        assert_eq!(t["output_norm.weight"], GgmlDType::F32);
    }

    #[test]
    fn more_bits_marks_llama_cpps_layers() {
        let got: Vec<usize> = (0..18).filter(|&i| more_bits(i, 18)).collect();
        // n/8 = 2, 7n/8 = 15: 0, 1, then (i - 2) % 3 == 2 (4, 7, 10, 13), 15..17.
        assert_eq!(got, [0, 1, 4, 7, 10, 13, 15, 16, 17]);
    }
}
