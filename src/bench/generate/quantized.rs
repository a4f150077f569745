//! The quantized path: candle-transformers' `quantized_llama` over GGUF
//! blocks, its matmuls candle's QMatMul (on the CPU the activations are
//! quantized to Q8 and dotted with the blocks; on CUDA, its dequantizing
//! matrix-vector and matrix-matrix kernels). A row is the file as stored, or
//! every 2-D weight requantized (dequantized to f32, then
//! `QTensor::quantize` to the row's type) into a GGUF written in memory
//! (`gguf_file::write`) and loaded through the same `from_gguf`, so both run
//! the same model code. Random weights take the second way from f32.

use std::collections::HashMap;
use std::io::Cursor;

use anyhow::{bail, Context, Result};
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;

use super::gguf::check::model_metadata;
use super::gguf::{open_regular, read, tensor_bytes, type_name};
use crate::error::contained;

/// What candle-transformers' loader reads a GGUF from.
trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}
use super::weights::{head_name, Source};
use super::{layer_matmul_names, tensor_shapes};
use super::{Dims, Lm};

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

/// The tensor `name` as the row holds it, on the host.
pub fn row_tensor(
    source: &Source,
    types: &HashMap<String, GgmlDType>,
    name: &str,
) -> Result<QTensor> {
    let t = *types
        .get(name)
        .with_context(|| format!("no tensor {name}"))?;
    let stored = source.stored(name)?;
    if stored.dtype() == t {
        return Ok(stored);
    }
    let f = stored.dequantize(&Device::Cpu)?;
    QTensor::quantize(&f, t).with_context(|| format!("quantizing {name} to {}", type_name(t)))
}

/// A row's weights as GGUF bytes in memory.
fn gguf_bytes(source: &Source, types: &HashMap<String, GgmlDType>) -> Result<Vec<u8>> {
    let d = source.dims();
    let mut tensors = Vec::new();
    for (name, _) in tensor_shapes(d) {
        let t = row_tensor(source, types, &name)?;
        tensors.push((name, t));
    }
    let md = model_metadata(d);
    let md: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md, &ts).context("writing the requantized GGUF in memory")?;
    Ok(out.into_inner())
}

/// quantized_llama for one row.
pub struct QuantizedLm {
    model: ModelWeights,
    device: Device,
}

impl QuantizedLm {
    /// Loads the row of `target` from `source` onto `device`.
    pub fn load(source: &Source, target: GgmlDType, device: &Device) -> Result<Self> {
        let types = row_types(source, target)?;
        // Either way candle-transformers reads a structure checked by the
        // suite's reader, with the checked sizes as its metadata.
        let load = |content, r: &mut dyn ReadSeek| {
            contained("loading the model (candle-transformers)", || {
                Ok(ModelWeights::from_gguf(content, &mut { r }, device)?)
            })
        };
        let model = match source {
            Source::File(f) if target == f.layer_type() => {
                let (file, _) = open_regular(&f.path)?;
                load(f.candle_content(), &mut std::io::BufReader::new(file))?
            }
            _ => {
                let bytes = gguf_bytes(source, &types)?;
                let n = bytes.len() as u64;
                let mut r = Cursor::new(bytes);
                let content = read::read(&mut r, n)?.to_candle(model_metadata(source.dims()));
                load(content, &mut r)?
            }
        };
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
/// `device`, for timing the matmuls alone.
pub fn matmuls(
    source: &Source,
    types: &HashMap<String, GgmlDType>,
    device: &Device,
) -> Result<(Vec<[QMatMul; 7]>, QMatMul)> {
    let d = source.dims();
    let on = |name: &str| -> Result<QMatMul> {
        let t = row_tensor(source, types, name)?;
        // The same blocks, moved: GGUF's raw bytes read onto the device.
        let t = if device.is_cpu() {
            t
        } else {
            let dims = t.shape().dims().to_vec();
            qtensor_from_ggml(t.dtype(), &t.data()?, dims, device)?
        };
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
    Ok((layers, on(head_name(d))?))
}
