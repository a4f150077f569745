//! The GGUF container read with every count, length and offset bounded by the
//! bytes the file has, before anything is allocated from it, and with checked
//! arithmetic throughout: what a file says cannot make this code allocate
//! more than the file could hold, loop longer than its bytes, overflow, or
//! divide by zero. It is the suite's only reader of a GGUF's structure
//! (header, metadata, tensor descriptions, where the data starts); its result
//! becomes candle's own [`Content`], so that candle-core and
//! candle-transformers are only ever handed a structure already checked.
//!
//! Why not candle's `Content::read`: it trusts `general.alignment` (0 divides
//! by zero), counts a tensor's elements without overflow checks, lets a key
//! or a tensor name appear twice (the last wins, silently), and reads
//! tensors' extents only when each is loaded. The limits here follow the
//! GGUF spec (ggml's gguf.md: version 2 and 3, u64 counts, 32-byte
//! default alignment, alignment a power of two, offsets multiples of it) and
//! llama.cpp's loader after its fuzzing (gguf.cpp: GGML_MAX_DIMS 4,
//! GGML_MAX_NAME 64, tensors within the file and not overlapping).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value, VersionedMagic};
use candle_core::quantized::GgmlDType;

/// GGUF's alignment of the tensor data when the file does not say.
const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's GGML_MAX_DIMS.
const MAX_DIMS: u32 = 4;
/// ggml's GGML_MAX_NAME (with its final NUL): a tensor name's bytes.
const MAX_NAME: u64 = 63;
/// Nested arrays deeper than this are refused (files hold flat arrays).
const MAX_DEPTH: usize = 4;
/// Every array element of the metadata together: a Llama 3 GGUF holds about
/// 410,000 (its vocabulary and merges); each becomes a 32-byte value here.
const MAX_ELEMENTS: u64 = 1 << 23;
/// One string's bytes: a chat template is kilobytes, a token a few bytes.
const MAX_STRING: u64 = 16 << 20;
/// The whole header (metadata and tensor descriptions): real files hold a
/// few MiB; beyond this a file is not a model's header.
const MAX_HEADER: u64 = 256 << 20;

/// One tensor's description, as the file gives it, checked.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub name: String,
    pub dtype: GgmlDType,
    /// As candle holds it: the file's dimensions reversed (rows first).
    pub dims: Vec<usize>,
    /// Elements and bytes, computed with checked arithmetic.
    pub elems: u64,
    pub bytes: u64,
    /// From the start of the tensor data.
    pub offset: u64,
}

/// A GGUF's structure, every part of it checked against the file's size.
#[derive(Clone, Debug)]
pub struct Gguf {
    pub version: u32,
    /// In the file's order; no key twice.
    pub metadata: Vec<(String, Value)>,
    /// In the file's order; no name twice.
    pub tensors: Vec<Tensor>,
    /// Where the tensor data starts (aligned).
    pub data_offset: u64,
}

impl Gguf {
    /// The metadata value at `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Candle's own description of the file, for candle's readers of the
    /// tensors; `metadata` replaces the file's (the checked values the
    /// model code reads, in the types it reads them as).
    pub fn to_candle(&self, metadata: HashMap<String, Value>) -> Content {
        let tensor_infos = self
            .tensors
            .iter()
            .map(|t| {
                let info = TensorInfo {
                    ggml_dtype: t.dtype,
                    shape: candle_core::Shape::from(t.dims.clone()),
                    offset: t.offset,
                };
                (t.name.clone(), info)
            })
            .collect();
        Content {
            magic: if self.version == 2 {
                VersionedMagic::GgufV2
            } else {
                VersionedMagic::GgufV3
            },
            metadata,
            tensor_infos,
            tensor_data_offset: self.data_offset,
        }
    }
}

/// A reader that knows how many bytes are left, and says where it failed.
struct Bounded<R> {
    r: R,
    pos: u64,
    size: u64,
    elements: u64,
}

impl<R: Read> Bounded<R> {
    fn left(&self) -> u64 {
        self.size - self.pos
    }

    fn take(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if self.pos.saturating_add(n) > MAX_HEADER {
            bail!(
                "{what} at byte {} runs past {} MiB: not a model's header",
                self.pos,
                MAX_HEADER >> 20
            );
        }
        if n > self.left() {
            bail!(
                "it is truncated: {what} at byte {} needs {n} bytes, the file has {} left",
                self.pos,
                self.left()
            );
        }
        let mut buf = vec![0u8; n as usize];
        self.r
            .read_exact(&mut buf)
            .with_context(|| format!("cannot read {what} at byte {}", self.pos))?;
        self.pos += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let v = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&v);
        Ok(a)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of things each at least `min` bytes long: never more than the
    /// bytes left can hold.
    fn count(&mut self, what: &str, min: u64) -> Result<u64> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n.checked_mul(min).is_none_or(|b| b > self.left()) {
            bail!(
                "it is truncated or corrupt: {what} at byte {at} is {n}, more than the {} bytes \
                 left could hold",
                self.left()
            );
        }
        Ok(n)
    }

    fn string(&mut self, what: &str, max: u64) -> Result<String> {
        let at = self.pos;
        let n = self.u64(what)?;
        if n > max {
            bail!("{what} at byte {at} is {n} bytes long, over this reader's limit of {max}");
        }
        let bytes = self.take(n, what)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn value(&mut self, kind: u32, key: &str, depth: usize) -> Result<Value> {
        let what = || format!("the value of {key}");
        Ok(match kind {
            0 => Value::U8(self.array::<1>(&what())?[0]),
            1 => Value::I8(i8::from_le_bytes(self.array(&what())?)),
            2 => Value::U16(u16::from_le_bytes(self.array(&what())?)),
            3 => Value::I16(i16::from_le_bytes(self.array(&what())?)),
            4 => Value::U32(self.u32(&what())?),
            5 => Value::I32(i32::from_le_bytes(self.array(&what())?)),
            6 => Value::F32(f32::from_le_bytes(self.array(&what())?)),
            7 => match self.array::<1>(&what())?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => bail!("{key} is a bool of byte {b} (GGUF's bools are 0 or 1)"),
            },
            8 => Value::String(self.string(&what(), MAX_STRING)?),
            9 => {
                if depth >= MAX_DEPTH {
                    bail!("{key} nests arrays more than {MAX_DEPTH} deep");
                }
                let inner = self.u32(&what())?;
                let min = min_size(inner).with_context(|| {
                    format!("{key} is an array of value type {inner}, which GGUF does not define")
                })?;
                let n = self.count(&format!("{key}'s length"), min)?;
                self.elements += n;
                if self.elements > MAX_ELEMENTS {
                    bail!(
                        "its metadata's arrays hold over {MAX_ELEMENTS} elements (at {key}), \
                         more than a model's vocabulary and merges"
                    );
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(inner, key, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64(&what())?),
            11 => Value::I64(i64::from_le_bytes(self.array(&what())?)),
            12 => Value::F64(f64::from_le_bytes(self.array(&what())?)),
            t => bail!("{key} has value type {t}, which GGUF does not define"),
        })
    }
}

/// The fewest bytes one value of GGUF value type `t` takes.
fn min_size(t: u32) -> Option<u64> {
    Some(match t {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        8 => 8,
        9 => 12,
        _ => return None,
    })
}

/// The ggml type with id `id` (ggml.h's `enum ggml_type`), of those candle
/// decodes.
fn ggml_type(id: u32) -> Option<GgmlDType> {
    use GgmlDType::*;
    Some(match id {
        0 => F32,
        1 => F16,
        2 => Q4_0,
        3 => Q4_1,
        6 => Q5_0,
        7 => Q5_1,
        8 => Q8_0,
        9 => Q8_1,
        10 => Q2K,
        11 => Q3K,
        12 => Q4K,
        13 => Q5K,
        14 => Q6K,
        15 => Q8K,
        30 => BF16,
        _ => return None,
    })
}

/// The alignment of the tensor data: `general.alignment` (an unsigned
/// integer, a power of two), or GGUF's default.
fn alignment(metadata: &[(String, Value)]) -> Result<u64> {
    let Some((_, v)) = metadata.iter().find(|(k, _)| k == "general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let a = v
        .to_u64()
        .ok()
        .filter(|_| !matches!(v, Value::Bool(_)))
        .context("general.alignment is not an unsigned integer")?;
    if !a.is_power_of_two() {
        bail!("general.alignment is {a}; GGUF's alignment is a power of two (32 by default)");
    }
    Ok(a)
}

/// Reads and checks the structure of the GGUF `r`, `size` bytes long, from
/// its start. Every refusal is one clause saying what is wrong and where.
pub fn read<R: Read + Seek>(r: &mut R, size: u64) -> Result<Gguf> {
    r.seek(SeekFrom::Start(0)).context("cannot read it")?;
    let mut b = Bounded {
        r,
        pos: 0,
        size,
        elements: 0,
    };
    if b.take(4.min(size), "its magic")? != b"GGUF" {
        bail!("it is not a GGUF file (it does not start with the bytes \"GGUF\")");
    }
    let version = b.u32("its version")?;
    if !(2..=3).contains(&version) {
        bail!(
            "it is GGUF version {version}; this reader reads versions 2 and 3 (llama.cpp writes 3)"
        );
    }
    // A tensor description is at least 32 bytes (name length, one dimension,
    // type, offset); a metadata entry at least 13 (key length, type, a byte).
    let n_tensors = b.count("its tensor count", 32)?;
    let n_kv = b.count("its metadata count", 13)?;
    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv as usize);
    let mut keys = std::collections::HashSet::new();
    for _ in 0..n_kv {
        let at = b.pos;
        let key = b.string("a metadata key", 1 << 16)?;
        if key.is_empty() {
            bail!("its metadata has an empty key at byte {at}");
        }
        if !keys.insert(key.clone()) {
            bail!("its metadata holds {key} twice (the second at byte {at})");
        }
        let kind = b.u32(&format!("{key}'s type"))?;
        let value = b.value(kind, &key, 0)?;
        metadata.push((key, value));
    }
    let align = alignment(&metadata)?;
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = std::collections::HashSet::new();
    for _ in 0..n_tensors {
        let t = tensor(&mut b, align)?;
        if !names.insert(t.name.clone()) {
            bail!("it describes tensor {} twice", t.name);
        }
        tensors.push(t);
    }
    let data_offset = b
        .pos
        .checked_next_multiple_of(align)
        .context("its tensor data would start past 2^64")?;
    check_extents(&tensors, data_offset, size)?;
    Ok(Gguf {
        version,
        metadata,
        tensors,
        data_offset,
    })
}

/// One tensor description: name, dimensions, type, offset; its elements and
/// bytes counted without overflow.
fn tensor<R: Read>(b: &mut Bounded<R>, align: u64) -> Result<Tensor> {
    let name = b.string("a tensor name", MAX_NAME)?;
    let n_dims = b.u32(&format!("tensor {name}'s dimension count"))?;
    if !(1..=MAX_DIMS).contains(&n_dims) {
        bail!("tensor {name} has {n_dims} dimensions; ggml's tensors have 1 to {MAX_DIMS}");
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    let mut elems: u64 = 1;
    for _ in 0..n_dims {
        let d = b.u64(&format!("tensor {name}'s dimensions"))?;
        elems = elems
            .checked_mul(d)
            .filter(|e| *e <= i64::MAX as u64)
            .with_context(|| format!("tensor {name}'s element count overflows"))?;
        if d == 0 {
            bail!("tensor {name} has a dimension of 0");
        }
        dims.push(usize::try_from(d).context("a dimension past this machine's sizes")?);
    }
    let id = b.u32(&format!("tensor {name}'s type"))?;
    let dtype = ggml_type(id).with_context(|| {
        format!("tensor {name} is of ggml type {id}, which this program does not read")
    })?;
    let block = dtype.block_size() as u64;
    if !(dims[0] as u64).is_multiple_of(block) {
        bail!(
            "tensor {name}'s rows of {} values are not whole blocks of {block} ({})",
            dims[0],
            super::type_name(dtype)
        );
    }
    let bytes = (elems / block)
        .checked_mul(dtype.type_size() as u64)
        .with_context(|| format!("tensor {name}'s size overflows"))?;
    let offset = b.u64(&format!("tensor {name}'s offset"))?;
    if !offset.is_multiple_of(align) {
        bail!("tensor {name}'s offset {offset} is not a multiple of the alignment {align}");
    }
    dims.reverse();
    Ok(Tensor {
        name,
        dtype,
        dims,
        elems,
        bytes,
        offset,
    })
}

/// Every tensor's bytes lie inside the file, and no two overlap.
fn check_extents(tensors: &[Tensor], data_offset: u64, size: u64) -> Result<()> {
    let mut spans: Vec<(u64, u64, &str)> = Vec::with_capacity(tensors.len());
    for t in tensors {
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.bytes))
            .filter(|e| *e <= size)
            .with_context(|| {
                format!(
                    "it is truncated: tensor {} ({} bytes at offset {}) ends past the file's {size} \
                     bytes (a download cut short? `just model` fetches it again once the file is \
                     removed)",
                    t.name, t.bytes, t.offset
                )
            })?;
        spans.push((data_offset + t.offset, end, &t.name));
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            bail!("tensors {} and {} overlap in the file", w[0].2, w[1].2);
        }
    }
    Ok(())
}
