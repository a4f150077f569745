//! The model file: a GGUF checked whole before anything else touches it. It
//! must be a regular file (a folder, a FIFO or a device is refused before it
//! is opened, and it is opened without blocking), whose structure
//! ([`read`]: header, metadata, tensor descriptions, extents) and whose
//! metadata (an architecture the suite runs), tensors and tokenizer ([`check`]) say nothing this program or
//! candle would trip on. Its tensors are then read on demand, each from the
//! extent [`read`] checked, through candle's own decoding of ggml blocks;
//! before that, every value and block scale is checked finite ([`finite`]).

pub mod check;
pub mod finite;
pub mod read;
pub mod vocab;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;

use super::{Arch, Config};
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

/// A checked GGUF file of a model the suite runs.
pub struct ModelFile {
    pub path: PathBuf,
    pub bytes: u64,
    pub gguf: Gguf,
    pub config: Config,
    /// general.name, or the file's stem.
    pub name: String,
}

/// The positions a model of `arch` takes at most here: what the rotary
/// tables of candle-transformers' model of it hold (its `MAX_SEQ_LEN`, for
/// Llama and Gemma 3; Qwen's are built for the file's context).
pub fn max_positions(arch: Arch) -> usize {
    use candle_transformers::models::{quantized_gemma3, quantized_llama};
    match arch {
        Arch::Llama => quantized_llama::MAX_SEQ_LEN,
        Arch::Gemma3 => quantized_gemma3::MAX_SEQ_LEN,
        Arch::Qwen2 | Arch::Qwen3 => u32::MAX as usize,
    }
}

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
        let config = check::config(&gguf).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
        check::tensors(&gguf, &config).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
        finite::check(&mut file, &gguf).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
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
            config,
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
        self.gguf.to_candle(check::model_metadata(&self.config))
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

    /// The file's quantization as llama.cpp names it ("Q4_K_M"), from
    /// `general.file_type`, else its layers' type ([`ModelFile::layer_type`]).
    pub fn quantization(&self) -> String {
        let named = match self.gguf.get("general.file_type") {
            Some(Value::U32(t)) => file_type_name(*t),
            Some(Value::I32(t)) => u32::try_from(*t).ok().and_then(file_type_name),
            _ => None,
        };
        named.map_or_else(|| type_name(self.layer_type()), str::to_string)
    }

    /// Whether every projection of the layers is stored as `t` (a file "of"
    /// that type, not a mix).
    pub fn uniform(&self, t: GgmlDType) -> bool {
        self.gguf
            .tensors
            .iter()
            .filter(|x| x.name.starts_with("blk.") && x.dims.len() == 2)
            .all(|x| x.dtype == t)
    }

    /// The layers' matmul type (the one holding most of their bytes).
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

/// llama.cpp's name of a file's quantization (`general.file_type`, its
/// `llama_ftype`): "Q4_K_M", "Q8_0"; `None` for a value it does not name.
pub fn file_type_name(ftype: u32) -> Option<&'static str> {
    Some(match ftype {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        32 => "BF16",
        _ => return None,
    })
}

/// Bytes of `elems` elements stored as `t`.
pub fn tensor_bytes(t: GgmlDType, elems: usize) -> u64 {
    (elems / t.block_size() * t.type_size()) as u64
}
