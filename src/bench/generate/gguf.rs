//! The model file: a GGUF checked before any work (it exists, is a GGUF, is
//! whole, is a Llama, holds tensor types this program reads and every tensor
//! a Llama needs at the sizes its metadata says), its sizes read into [`Dims`],
//! and its tensors read on demand. candle-core's own GGUF reader
//! (`candle_core::quantized::gguf_file`) does the parsing; this module turns
//! what it refuses into one line that says what is wrong with the file.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;

use super::Dims;
use crate::quote::shell_quote;

/// A path as a message shows it (shell-quoted where it needs it).
fn shown(p: &Path) -> String {
    shell_quote(p.as_os_str())
}

/// The tensor types a file may store: the float types and the block
/// quantizations candle's QMatMul multiplies (Q8_1 and Q8_K are only the
/// activations' formats inside those kernels, never a file's).
pub const READ_TYPES: [GgmlDType; 13] = [
    GgmlDType::F32,
    GgmlDType::F16,
    GgmlDType::BF16,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// GGUF's name of a type ("Q4_1", "Q6_K", "F32").
pub fn type_name(t: GgmlDType) -> String {
    let debug = format!("{t:?}");
    match debug.strip_suffix('K') {
        Some(head) if head.starts_with('Q') => format!("{head}_K"),
        _ => debug,
    }
}

/// A checked GGUF file of a Llama-architecture model.
pub struct ModelFile {
    pub path: PathBuf,
    pub bytes: u64,
    pub content: Content,
    pub dims: Dims,
    /// general.name, or the file's stem.
    pub name: String,
}

fn u(content: &Content, key: &str) -> Result<usize> {
    let v = content
        .metadata
        .get(key)
        .with_context(|| format!("its metadata has no {key}"))?;
    Ok(v.to_u64()
        .with_context(|| format!("{key} is not a number"))? as usize)
}

fn f(content: &Content, key: &str) -> Option<f64> {
    match content.metadata.get(key)? {
        Value::F32(v) => Some(*v as f64),
        Value::F64(v) => Some(*v),
        v => v.to_u64().ok().map(|n| n as f64),
    }
}

/// The metadata's string at `key`.
pub fn string<'a>(content: &'a Content, key: &str) -> Option<&'a str> {
    content
        .metadata
        .get(key)
        .and_then(|v| v.to_string().ok())
        .map(String::as_str)
}

/// What a candle read error says about the file, in words.
fn header_error(e: candle_core::Error) -> String {
    // Its first line: candle adds a backtrace after it when RUST_BACKTRACE is set.
    let full = e.to_string();
    let text = full.lines().next().unwrap_or_default().trim();
    if let Some(id) = text.strip_prefix("unknown dtype for tensor ") {
        let id = id.trim();
        let names: Vec<String> = READ_TYPES.iter().map(|t| type_name(*t)).collect();
        return format!(
            "it stores a tensor of ggml type {id}, which this program does not read (it reads {})",
            names.join(", ")
        );
    }
    if text.contains("failed to fill whole buffer") || text.contains("remaining") {
        return format!("it is truncated: its header ends early ({text})");
    }
    format!("its header cannot be read ({text})")
}

impl ModelFile {
    /// Opens and checks `path`; every refusal is one line naming the file.
    pub fn open(path: &Path) -> Result<Self> {
        let what = shown(path);
        let file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!("{what}: no such file"),
            _ => anyhow::anyhow!("{what}: cannot open it ({e})"),
        })?;
        let bytes = file
            .metadata()
            .with_context(|| format!("{what}: cannot read its size"))?
            .len();
        let mut reader = BufReader::new(file);
        let mut magic = [0u8; 4];
        if reader.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
            bail!("{what} is not a GGUF file (it does not start with the bytes \"GGUF\")");
        }
        let mut reader = reader.into_inner();
        use std::io::Seek;
        reader
            .rewind()
            .with_context(|| format!("{what}: cannot read it"))?;
        let content = Content::read(&mut BufReader::new(reader))
            .map_err(|e| anyhow::anyhow!("{what}: {}", header_error(e)))?;
        let arch = string(&content, "general.architecture").unwrap_or("(none)");
        if arch != "llama" {
            bail!(
                "{what} is a '{arch}' model (general.architecture); generate runs \
                 Llama-architecture GGUF files ('llama': Llama 2/3, SmolLM, TinyLlama...)"
            );
        }
        let dims = dims(&content).with_context(|| what.clone())?;
        check_tensors(&content, &dims, bytes).with_context(|| what.clone())?;
        let name = string(&content, "general.name")
            .map(str::to_string)
            .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_default();
        Ok(Self {
            path: path.to_path_buf(),
            bytes,
            content,
            dims,
            name,
        })
    }

    /// The tensor `name` as stored, read onto `device`.
    pub fn tensor(&self, name: &str, device: &Device) -> Result<QTensor> {
        let mut r = BufReader::new(
            File::open(&self.path).with_context(|| format!("cannot open {}", shown(&self.path)))?,
        );
        Ok(self.content.tensor(&mut r, name, device)?)
    }

    /// The tensors by stored type: how many, and their bytes.
    pub fn stored(&self) -> BTreeMap<String, (usize, u64)> {
        let mut by = BTreeMap::new();
        for info in self.content.tensor_infos.values() {
            let e = by.entry(type_name(info.ggml_dtype)).or_insert((0, 0));
            e.0 += 1;
            e.1 += tensor_bytes(info.ggml_dtype, info.shape.elem_count());
        }
        by
    }

    /// The layers' matmul type (the one holding most of their bytes): the
    /// file's quantization "as stored".
    pub fn layer_type(&self) -> GgmlDType {
        let mut by: BTreeMap<u32, (GgmlDType, u64)> = BTreeMap::new();
        for (name, info) in &self.content.tensor_infos {
            if name.starts_with("blk.") && info.shape.rank() == 2 {
                let e = by
                    .entry(info.ggml_dtype as u32)
                    .or_insert((info.ggml_dtype, 0));
                e.1 += tensor_bytes(info.ggml_dtype, info.shape.elem_count());
            }
        }
        by.into_values()
            .max_by_key(|(_, b)| *b)
            .map_or(GgmlDType::F32, |(t, _)| t)
    }
}

/// Bytes of `elems` elements stored as `t`.
pub fn tensor_bytes(t: GgmlDType, elems: usize) -> u64 {
    (elems / t.block_size() * t.type_size()) as u64
}

/// The rotary tables quantized_llama precomputes (candle-transformers'
/// `MAX_SEQ_LEN`): positions past it have none.
pub const MAX_POSITIONS: usize = candle_transformers::models::quantized_llama::MAX_SEQ_LEN;

fn dims(c: &Content) -> Result<Dims> {
    let hidden = u(c, "llama.embedding_length")?;
    let heads = u(c, "llama.attention.head_count")?;
    let kv_heads = u(c, "llama.attention.head_count_kv").unwrap_or(heads);
    if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) || hidden % heads != 0 {
        bail!("its heads ({heads} query, {kv_heads} key/value) do not divide its width {hidden}");
    }
    let head_dim = hidden / heads;
    if let Ok(rope) = u(c, "llama.rope.dimension_count") {
        if rope != head_dim {
            bail!(
                "rotary embedding over {rope} of {head_dim} dimensions per head is not supported"
            );
        }
    }
    let vocab = c
        .tensor_infos
        .get("token_embd.weight")
        .context("it has no token_embd.weight")?
        .shape
        .dims()[0];
    let context = u(c, "llama.context_length")
        .unwrap_or(MAX_POSITIONS)
        .min(MAX_POSITIONS);
    Ok(Dims {
        layers: u(c, "llama.block_count")?,
        hidden,
        heads,
        kv_heads,
        head_dim,
        mlp: u(c, "llama.feed_forward_length")?,
        vocab,
        context,
        rope_theta: f(c, "llama.rope.freq_base").unwrap_or(10_000.0),
        rms_eps: f(c, "llama.attention.layer_norm_rms_epsilon").unwrap_or(1e-5),
        tied: !c.tensor_infos.contains_key("output.weight"),
    })
}

/// Every tensor a Llama needs, at its shape, of a type read here, whole.
fn check_tensors(c: &Content, d: &Dims, file_bytes: u64) -> Result<()> {
    for (name, info) in &c.tensor_infos {
        if !READ_TYPES.contains(&info.ggml_dtype) {
            bail!(
                "tensor {name} is stored as {}, which this program does not read",
                type_name(info.ggml_dtype)
            );
        }
        let end = c.tensor_data_offset
            + info.offset
            + tensor_bytes(info.ggml_dtype, info.shape.elem_count());
        if end > file_bytes {
            bail!(
                "it is truncated: tensor {name} ends at byte {end}, the file has {file_bytes} \
                 (a download cut short? `just model` fetches it again once the file is removed)"
            );
        }
    }
    for (name, shape) in super::tensor_shapes(d) {
        let info = c
            .tensor_infos
            .get(&name)
            .with_context(|| format!("it has no tensor {name}, which a Llama needs"))?;
        if info.shape.dims() != shape.as_slice() {
            bail!(
                "tensor {name} is {:?}, its metadata's sizes make it {shape:?}",
                info.shape.dims()
            );
        }
    }
    Ok(())
}
