//! The quantized path: candle-transformers' `quantized_llama` over GGUF
//! blocks, its matmuls candle's QMatMul (on the CPU the activations are
//! quantized to Q8 and dotted with the blocks; on CUDA, its dequantizing
//! matrix-vector and matrix-matrix kernels). A row is the file as stored, or
//! every 2-D weight requantized (dequantized to f32, then
//! `QTensor::quantize` to the row's type) into a GGUF written in memory
//! (`gguf_file::write`) and loaded through the same `from_gguf`, so both run
//! the same model code. Random weights take the second way from f32. A row's
//! weights are quantized once ([`Gguf::of`]): the model and its matmuls alone
//! both read that one GGUF.

use std::collections::HashMap;
use std::io::{Cursor, Read, Seek};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use rayon::prelude::*;

use super::gguf::check::model_metadata;
use super::gguf::{open_regular, read, tensor_bytes, type_name};
use super::weights::{head_name, Source, Weights};
use super::{layer_matmul_names, tensor_shapes};
use super::{Dims, Lm};
use crate::error::contained;

/// The type each tensor has in a row of `target` from `source`: as stored
/// when the target is the layers' stored type, else every 2-D weight in
/// `target` and the norms in f32.
pub fn row_types(source: &Source, target: GgmlDType) -> Result<HashMap<String, GgmlDType>> {
    let stored = target == source.layer_type();
    let mut out = HashMap::new();
    for (name, shape) in tensor_shapes(source.dims()) {
        let t = match source {
            Source::File(f) if stored => {
                f.gguf
                    .tensor(&name)
                    .with_context(|| format!("no tensor {name}"))?
                    .dtype
            }
            _ if shape.len() == 2 => target,
            _ => GgmlDType::F32,
        };
        out.insert(name, t);
    }
    Ok(out)
}

/// Whether `target` can hold every weight of `d`: its blocks must divide each
/// row (32 values for Q4_0..Q8_0, 256 for the k-quants).
pub fn check_target(d: &Dims, target: GgmlDType) -> Result<()> {
    // candle's CPU dot products for Q4_1, Q5_0 and Q5_1 take blocks in pairs.
    let pairs = matches!(target, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1);
    let block = target.block_size() * if pairs { 2 } else { 1 };
    let widths = [d.hidden, d.mlp];
    if let Some(w) = widths.iter().find(|w| !w.is_multiple_of(block)) {
        bail!(
            "--dtypes {}: its kernels take rows in blocks of {block} values, and the model's rows \
             of {w} are not a multiple of that",
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
    let d = weights.dims();
    let tensors = tensor_shapes(d)
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
/// the row is its stored type, else every tensor quantized into a GGUF held
/// in memory. The model and the row's matmuls alone both read it, through
/// the suite's checked structure ([`read`]) with the checked sizes as the
/// metadata candle-transformers reads (never the file's own).
pub enum Gguf {
    File(PathBuf, Box<read::Gguf>, Dims),
    Memory(Vec<u8>, Dims),
}

impl Gguf {
    /// The row of `target` from `weights`.
    pub fn of(weights: &Weights, target: GgmlDType) -> Result<Self> {
        match weights.source() {
            Source::File(f) if target == f.layer_type() => Ok(Self::File(
                f.path.clone(),
                Box::new(f.gguf.clone()),
                f.dims.clone(),
            )),
            _ => Ok(Self::Memory(
                gguf_bytes(weights, &row_types(weights.source(), target)?)?,
                weights.dims().clone(),
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

    /// `f` on the GGUF's header and a reader at its start.
    fn read<T>(&self, f: impl FnOnce(Content, &mut dyn ReadSeek) -> Result<T>) -> Result<T> {
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

/// What candle's GGUF reader reads from.
trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

/// quantized_llama for one row.
pub struct QuantizedLm {
    model: ModelWeights,
    device: Device,
}

impl QuantizedLm {
    /// Loads the row of `target` from `weights` onto `device`.
    pub fn load(weights: &Weights, target: GgmlDType, device: &Device) -> Result<Self> {
        Self::from_gguf(&Gguf::of(weights, target)?, device)
    }

    /// Loads the row held in `gguf` onto `device`.
    pub fn from_gguf(gguf: &Gguf, device: &Device) -> Result<Self> {
        let model =
            gguf.read(|content, mut r| Ok(ModelWeights::from_gguf(content, &mut r, device)?))?;
        Ok(Self {
            model,
            device: device.clone(),
        })
    }
}

impl Lm for QuantizedLm {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        let x = Tensor::new(tokens, &self.device)?.unsqueeze(0)?;
        Ok(self.model.forward(&x, pos)?)
    }

    fn device(&self) -> &Device {
        &self.device
    }
}

/// Bytes a row holds, and bytes one token reads, from its tensors' types.
/// quantized_llama keeps the embedding dequantized to f32 for the lookup and
/// multiplies the output head (the embedding's blocks when tied) as stored.
pub fn bytes(d: &Dims, types: &HashMap<String, GgmlDType>) -> (u64, u64) {
    let of = |name: &str, elems: usize| tensor_bytes(types[name], elems);
    let (h, v) = (d.hidden, d.vocab);
    let mut matmuls = of(head_name(d), v * h);
    for l in 0..d.layers {
        for (name, (r, c)) in layer_matmul_names(l).iter().zip(d.layer_matmuls()) {
            matmuls += of(name, r * c);
        }
    }
    let embed_f32 = (v * h * 4) as u64;
    let norms = ((2 * d.layers + 1) * h * 4) as u64;
    let held = matmuls + embed_f32 + norms;
    let per_token = crate::bench::decoder::weight_bytes_per_token(d, matmuls, 4, 4);
    (held, per_token)
}

/// Every layer's projections and the head as the row holds them, on
/// `device`, for timing the matmuls alone: read from the row's GGUF, its
/// blocks moved as they are (never quantized again).
pub fn matmuls(gguf: &Gguf, d: &Dims, device: &Device) -> Result<(Vec<[QMatMul; 7]>, QMatMul)> {
    gguf.read(|content, mut r| {
        let mut on = |name: &str| -> Result<QMatMul> {
            let t = content.tensor(&mut r, name, device)?;
            Ok(QMatMul::from_qtensor(t)?)
        };
        let mut layers = Vec::with_capacity(d.layers);
        for l in 0..d.layers {
            let names = layer_matmul_names(l);
            let mut v = Vec::with_capacity(7);
            for n in &names {
                v.push(on(n)?);
            }
            let arr: [QMatMul; 7] = v
                .try_into()
                .map_err(|_| anyhow::anyhow!("seven projections"))?;
            layers.push(arr);
        }
        let head = on(head_name(d))?;
        Ok((layers, head))
    })
}
