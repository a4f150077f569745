//! The model file: a GGUF checked whole before anything else touches it. It
//! must be a regular file (a folder, a FIFO or a device is refused before it
//! is opened, and it is opened without blocking), whose structure
//! ([`read`]: header, metadata, tensor descriptions, extents) and whose Llama
//! metadata, tensors and tokenizer ([`check`]) say nothing this program or
//! candle would trip on. Its tensors are then read on demand, each from the
//! extent [`read`] checked, through candle's own decoding of ggml blocks.

pub mod check;
pub mod read;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;

use super::Dims;
use crate::error::contained;
use crate::quote::shown;
pub use read::Gguf;

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
    pub gguf: Gguf,
    pub dims: Dims,
    /// general.name, or the file's stem.
    pub name: String,
}

/// The rotary tables quantized_llama precomputes (candle-transformers'
/// `MAX_SEQ_LEN`): positions past it have none.
pub const MAX_POSITIONS: usize = candle_transformers::models::quantized_llama::MAX_SEQ_LEN;

/// `path` opened for reading if it is a regular file (after links): never a
/// folder, and never a FIFO or a device, which could block or never end.
/// Opened without blocking, and checked again once open, so that what was
/// checked is what is read.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let what = shown(path);
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!("{what}: no such file"),
        _ => anyhow::anyhow!("{what}: cannot read it ({e})"),
    })?;
    let refuse = |t: std::fs::FileType| -> Result<()> {
        if t.is_dir() {
            bail!("{what} is a folder, not a GGUF file");
        }
        if !t.is_file() {
            let kind = if t.is_fifo() {
                "a FIFO"
            } else if t.is_socket() {
                "a socket"
            } else {
                "a device"
            };
            bail!("{what} is {kind}, not a regular file: give the model's file itself");
        }
        Ok(())
    };
    refuse(meta.file_type())?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| anyhow::anyhow!("{what}: cannot open it ({e})"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("{what}: cannot read its size"))?;
    refuse(meta.file_type())?;
    Ok((file, meta.len()))
}

impl ModelFile {
    /// Opens and checks `path`; every refusal is one line naming the file.
    pub fn open(path: &Path) -> Result<Self> {
        let what = shown(path);
        let (mut file, bytes) = open_regular(path)?;
        let gguf = read::read(&mut std::io::BufReader::new(&mut file), bytes)
            .map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
        let arch = check::string(&gguf, "general.architecture")
            .map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?
            .unwrap_or("(none)");
        if arch != "llama" {
            bail!(
                "{what} is a '{arch}' model (general.architecture); generate runs \
                 Llama-architecture GGUF files ('llama': Llama 2/3, SmolLM, TinyLlama...)"
            );
        }
        let dims = check::dims(&gguf).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
        check::tensors(&gguf, &dims).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
        let name = check::string(&gguf, "general.name")
            .ok()
            .flatten()
            .map(str::to_string)
            .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_default();
        Ok(Self {
            path: path.to_path_buf(),
            bytes,
            gguf,
            dims,
            name,
        })
    }

    /// The tensor `name` as stored, read onto `device` from the extent the
    /// check found inside the file.
    pub fn tensor(&self, name: &str, device: &Device) -> Result<QTensor> {
        let t = self
            .gguf
            .tensor(name)
            .with_context(|| format!("{}: no tensor {name}", shown(&self.path)))?;
        let (mut file, _) = open_regular(&self.path)?;
        file.seek(SeekFrom::Start(self.gguf.data_offset + t.offset))
            .and_then(|_| {
                let mut raw = vec![0u8; t.bytes as usize];
                file.read_exact(&mut raw).map(|()| raw)
            })
            .with_context(|| format!("{}: cannot read tensor {name}", shown(&self.path)))
            .and_then(|raw| {
                contained(&format!("decoding tensor {name}"), || {
                    Ok(qtensor_from_ggml(t.dtype, &raw, t.dims.clone(), device)?)
                })
            })
    }

    /// Candle's description of the file with the checked sizes as its
    /// metadata, for candle-transformers' loader (which reads the tensors
    /// itself, from the extents checked here).
    pub fn candle_content(&self) -> Content {
        self.gguf.to_candle(check::model_metadata(&self.dims))
    }

    /// The tensors by stored type: how many, and their bytes.
    pub fn stored(&self) -> BTreeMap<String, (usize, u64)> {
        let mut by = BTreeMap::new();
        for t in &self.gguf.tensors {
            let e = by.entry(type_name(t.dtype)).or_insert((0, 0));
            e.0 += 1;
            e.1 += t.bytes;
        }
        by
    }

    /// The layers' matmul type (the one holding most of their bytes): the
    /// file's quantization "as stored".
    pub fn layer_type(&self) -> GgmlDType {
        let mut by: BTreeMap<u32, (GgmlDType, u64)> = BTreeMap::new();
        for t in &self.gguf.tensors {
            if t.name.starts_with("blk.") && t.dims.len() == 2 {
                let e = by.entry(t.dtype as u32).or_insert((t.dtype, 0));
                e.1 += t.bytes;
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
