//! What a Llama GGUF's metadata must say, checked before any tensor is read:
//! every key this program or candle-transformers' `quantized_llama` reads, by
//! its type, its range and its relation to the others and to the tensors;
//! every tensor a Llama needs, at the shape those sizes give; and the
//! tokenizer's vocabulary, merges and special ids. A count read from the
//! metadata is bounded by what the file holds before anything is built from
//! it (the layers by the tensors there are, the widths by the embedding's
//! shape). Each refusal is one clause naming the key or the tensor.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Value;

use super::read::Gguf;
use super::{type_name, Dims, MAX_POSITIONS, READ_TYPES};

/// GGUF's token types (llama.cpp's `llama_token_type`): 3 is a control token
/// (`<|im_start|>`), 4 a user-defined one; both match as whole special tokens.
/// 6 is a byte token (`<0x0A>`); 0 to 6 are all the types there are.
pub const CONTROL: i32 = 3;
pub const USER_DEFINED: i32 = 4;
const BYTE: i32 = 6;
const TOKEN_TYPES: std::ops::RangeInclusive<i32> = 0..=6;

/// Tensors of one layer: two norms and seven projections.
const LAYER_TENSORS: usize = 9;

/// An unsigned integer at `key` (any of GGUF's integer types, not negative),
/// at most u32's range: quantized_llama reads these as u32.
fn uint(g: &Gguf, key: &str) -> Result<Option<usize>> {
    let Some(v) = g.get(key) else {
        return Ok(None);
    };
    let n: Option<i128> = match v {
        Value::U8(x) => Some(*x as i128),
        Value::U16(x) => Some(*x as i128),
        Value::U32(x) => Some(*x as i128),
        Value::U64(x) => Some(*x as i128),
        Value::I8(x) => Some(*x as i128),
        Value::I16(x) => Some(*x as i128),
        Value::I32(x) => Some(*x as i128),
        Value::I64(x) => Some(*x as i128),
        _ => None,
    };
    let n = n.with_context(|| format!("{key} is {}, not an integer", kind(v)))?;
    if !(0..=u32::MAX as i128).contains(&n) {
        bail!("{key} is {n}, outside 0..=4294967295");
    }
    Ok(Some(n as usize))
}

fn required(g: &Gguf, key: &str) -> Result<usize> {
    let n = uint(g, key)?.with_context(|| format!("its metadata has no {key}"))?;
    if n == 0 {
        bail!("{key} is 0");
    }
    Ok(n)
}

/// A float at `key` (f32 or f64), finite and in `range` when present.
fn float(g: &Gguf, key: &str, ok: impl Fn(f64) -> bool, want: &str) -> Result<Option<f64>> {
    let v = match g.get(key) {
        None => return Ok(None),
        Some(Value::F32(x)) => *x as f64,
        Some(Value::F64(x)) => *x,
        Some(v) => bail!("{key} is {}, not a float", kind(v)),
    };
    if !v.is_finite() || !ok(v) {
        bail!("{key} is {v}; it must be {want}");
    }
    Ok(Some(v))
}

/// The metadata's string at `key`, refusing another type there.
pub fn string<'a>(g: &'a Gguf, key: &str) -> Result<Option<&'a str>> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => bail!("{key} is {}, not a string", kind(v)),
    }
}

/// A value's GGUF type, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::U8(_) => "a u8",
        Value::I8(_) => "an i8",
        Value::U16(_) => "a u16",
        Value::I16(_) => "an i16",
        Value::U32(_) => "a u32",
        Value::I32(_) => "an i32",
        Value::U64(_) => "a u64",
        Value::I64(_) => "an i64",
        Value::F32(_) => "an f32",
        Value::F64(_) => "an f64",
        Value::Bool(_) => "a bool",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    }
}

/// The model's sizes from its metadata and its embedding's shape, each in
/// range and consistent with the others.
pub fn dims(g: &Gguf) -> Result<Dims> {
    if uint(g, "llama.expert_count")?.is_some_and(|n| n > 0) {
        bail!("it is a mixture of experts (llama.expert_count); generate runs dense Llamas");
    }
    let embd = g
        .tensor("token_embd.weight")
        .context("it has no tensor token_embd.weight, which a Llama needs")?;
    let [vocab, width] = embd.dims[..] else {
        bail!("tensor token_embd.weight is {:?}, not a matrix", embd.dims);
    };
    let hidden = required(g, "llama.embedding_length")?;
    if hidden != width {
        bail!("llama.embedding_length is {hidden}, its token_embd.weight rows are {width} wide");
    }
    let heads = required(g, "llama.attention.head_count")?;
    let kv_heads = match uint(g, "llama.attention.head_count_kv")? {
        Some(0) => bail!("llama.attention.head_count_kv is 0"),
        Some(n) => n,
        None => heads,
    };
    if !heads.is_multiple_of(kv_heads) || !hidden.is_multiple_of(heads) {
        bail!(
            "its heads ({heads} query, llama.attention.head_count; {kv_heads} key/value, \
             .head_count_kv) do not divide its width {hidden}"
        );
    }
    let head_dim = hidden / heads;
    if !head_dim.is_multiple_of(2) {
        bail!("its heads are {head_dim} wide; rotary embedding turns pairs, so an even width");
    }
    // Missing, it is the head's width (llama.cpp's default for n_rot).
    if let Some(rope) = uint(g, "llama.rope.dimension_count")? {
        if rope != head_dim {
            bail!(
                "llama.rope.dimension_count is {rope}: rotary embedding over part of a head's \
                 {head_dim} dimensions is not supported"
            );
        }
    }
    let layers = required(g, "llama.block_count")?;
    // Bounded by the file before the list of expected tensors is built.
    if layers > g.tensors.len() / LAYER_TENSORS {
        bail!(
            "llama.block_count is {layers}, but the file holds {} tensors ({LAYER_TENSORS} a layer)",
            g.tensors.len()
        );
    }
    let context = match uint(g, "llama.context_length")? {
        Some(0) => bail!("llama.context_length is 0"),
        Some(n) => n.min(MAX_POSITIONS),
        None => MAX_POSITIONS,
    };
    let rope_theta = float(
        g,
        "llama.rope.freq_base",
        |v| v > 0.0 && v <= f32::MAX as f64,
        "above 0 (and an f32)",
    )?
    .unwrap_or(10_000.0);
    let rms_eps = float(
        g,
        "llama.attention.layer_norm_rms_epsilon",
        |v| v > 0.0 && v < 1.0,
        "between 0 and 1",
    )?
    .unwrap_or(1e-5);
    Ok(Dims {
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        mlp: required(g, "llama.feed_forward_length")?,
        vocab,
        context,
        rope_theta,
        rms_eps,
        tied: g.tensor("output.weight").is_none(),
    })
}

/// Every tensor of a type read here, and every tensor a Llama of sizes `d`
/// needs at its shape.
pub fn tensors(g: &Gguf, d: &Dims) -> Result<()> {
    for t in &g.tensors {
        if !READ_TYPES.contains(&t.dtype) {
            bail!(
                "tensor {} is stored as {}, which this program does not read",
                t.name,
                type_name(t.dtype)
            );
        }
    }
    for (name, shape) in crate::bench::generate::tensor_shapes(d) {
        let t = g
            .tensor(&name)
            .with_context(|| format!("it has no tensor {name}, which a Llama needs"))?;
        if t.dims != shape {
            bail!(
                "tensor {name} is {:?}, its metadata's sizes make it {shape:?}",
                t.dims
            );
        }
    }
    Ok(())
}

/// An array of strings at `key`.
fn strings<'a>(g: &'a Gguf, key: &str) -> Result<Option<Vec<&'a str>>> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.as_str()),
                v => bail!("{key} holds {}, not only strings", kind(v)),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some),
        Some(v) => bail!("{key} is {}, not an array of strings", kind(v)),
    }
}

/// The tokenizer a GGUF names (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TokenizerModel {
    /// "gpt2": GPT-2-style byte-level BPE (SmolLM, Llama 3), by its merges.
    Gpt2,
    /// "llama": SentencePiece-style (Llama 2, Gemma), by its tokens' scores.
    Spm,
}

/// A GGUF's tokenizer, checked: its model, its tokens, their types, its
/// merges (BPE) or scores (SPM), its special ids, each in range, and whether
/// a text's ids start with BOS and end with EOS.
pub struct Vocabulary<'a> {
    pub model: TokenizerModel,
    pub tokens: Vec<&'a str>,
    pub types: Vec<i32>,
    pub merges: Vec<(&'a str, &'a str)>,
    /// One finite score per token for "llama"; empty for "gpt2".
    pub scores: Vec<f32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub add_space_prefix: bool,
    pub add_bos: bool,
    pub add_eos: bool,
    pub template: Option<&'a str>,
}

/// The bool at `key`, or `default` when the file has none.
fn flag(g: &Gguf, key: &str, default: bool) -> Result<bool> {
    match g.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => bail!("{key} is {}, not a bool", kind(v)),
    }
}

/// The tokenizer's metadata of `g`, whose embedding has `rows` rows.
pub fn vocabulary(g: &Gguf, rows: usize) -> Result<Vocabulary<'_>> {
    let model = match string(g, "tokenizer.ggml.model")?.unwrap_or("(none)") {
        "gpt2" => TokenizerModel::Gpt2,
        "llama" => TokenizerModel::Spm,
        other => bail!(
            "its tokenizer is '{other}' (tokenizer.ggml.model); generate builds GPT-2-style \
             byte-level BPE ('gpt2': SmolLM, Llama 3) and SentencePiece-style ('llama': \
             Llama 2, Gemma) tokenizers from a GGUF"
        ),
    };
    let spm = model == TokenizerModel::Spm;
    let tokens = strings(g, "tokenizer.ggml.tokens")?
        .context("its metadata has no tokenizer.ggml.tokens (a tokenizer is needed for text)")?;
    if tokens.is_empty() || tokens.len() > rows {
        bail!(
            "tokenizer.ggml.tokens holds {} tokens, its embedding (token_embd.weight) {rows} rows",
            tokens.len()
        );
    }
    let types = token_types(g, &tokens, spm)?;
    let (merges, scores) = match model {
        TokenizerModel::Gpt2 => (merges(g, &tokens, &types)?, Vec::new()),
        TokenizerModel::Spm => (Vec::new(), scores(g, tokens.len())?),
    };
    // A missing id: none for "gpt2"; llama.cpp's defaults for "llama" (BOS 1,
    // EOS 2, unknown 0), where the vocabulary holds them.
    let id = |key: &str, spm_default: Option<u32>| -> Result<Option<u32>> {
        match uint(g, key)? {
            Some(i) if i >= tokens.len() => bail!(
                "{key} is {i}, past its vocabulary of {} tokens",
                tokens.len()
            ),
            Some(i) => Ok(Some(i as u32)),
            None => Ok(spm_default.filter(|&i| spm && (i as usize) < tokens.len())),
        }
    };
    // llama.cpp's defaults: an SPM vocabulary starts a text with BOS and a
    // space; the GPT-2 files here add nothing unless they say so.
    let add_bos = flag(g, "tokenizer.ggml.add_bos_token", spm)?;
    let add_eos = flag(g, "tokenizer.ggml.add_eos_token", false)?;
    let v = Vocabulary {
        model,
        bos: id("tokenizer.ggml.bos_token_id", Some(1))?,
        eos: id("tokenizer.ggml.eos_token_id", Some(2))?,
        eot: id("tokenizer.ggml.eot_token_id", None)?,
        unk: id("tokenizer.ggml.unknown_token_id", Some(0))?,
        add_space_prefix: flag(g, "tokenizer.ggml.add_space_prefix", spm)?,
        add_bos,
        add_eos,
        template: string(g, "tokenizer.chat_template")?,
        tokens,
        types,
        merges,
        scores,
    };
    if v.add_bos && v.bos.is_none() {
        bail!("tokenizer.ggml.add_bos_token is true, but it has no tokenizer.ggml.bos_token_id");
    }
    if v.add_eos && v.eos.is_none() {
        bail!("tokenizer.ggml.add_eos_token is true, but it has no tokenizer.ggml.eos_token_id");
    }
    Ok(v)
}

/// Each token's score (`tokenizer.ggml.scores`, one finite f32 per token of
/// `n`): an SPM tokenizer merges by them.
fn scores(g: &Gguf, n: usize) -> Result<Vec<f32>> {
    const KEY: &str = "tokenizer.ggml.scores";
    let items = match g.get(KEY) {
        None => bail!("its metadata has no {KEY} (a 'llama' tokenizer merges by them)"),
        Some(Value::Array(v)) if v.len() == n => v,
        Some(v) => bail!(
            "{KEY} is {} of {} values, not one f32 per token ({n})",
            kind(v),
            match v {
                Value::Array(a) => a.len(),
                _ => 1,
            },
        ),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Value::F32(x) if x.is_finite() => Ok(*x),
            Value::F32(x) => bail!("{KEY} holds {x} for token {i}; a score must be finite"),
            s => bail!("{KEY} holds {}, not f32s", kind(s)),
        })
        .collect()
}

/// Each token's type (`tokenizer.ggml.token_type`, one i32 per token of
/// `tokens`, each one of GGUF's types), or every token a normal one (1) when
/// the file has none. In an SPM vocabulary (`spm`) a byte token reads
/// `<0xXX>`: its text says its byte.
fn token_types(g: &Gguf, tokens: &[&str], spm: bool) -> Result<Vec<i32>> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let n = tokens.len();
    let types: Vec<i32> = match g.get(KEY) {
        None => vec![1; n],
        Some(Value::Array(v)) if v.len() == n => v
            .iter()
            .map(|t| match t {
                Value::I32(x) => Ok(*x),
                t => bail!("{KEY} holds {}, not i32s", kind(t)),
            })
            .collect::<Result<_>>()?,
        Some(v) => bail!(
            "{KEY} is {} of {} values, not one i32 per token ({n})",
            kind(v),
            match v {
                Value::Array(a) => a.len(),
                _ => 1,
            },
        ),
    };
    for (i, (&t, s)) in types.iter().zip(tokens).enumerate() {
        if !TOKEN_TYPES.contains(&t) {
            bail!("{KEY} holds {t} for token {i}; GGUF's token types are 0 to 6");
        }
        if spm && t == BYTE && byte_of(s).is_none() {
            bail!("token {i} is a byte token ({KEY} 6), but it reads {s:?}, not <0xXX>");
        }
    }
    Ok(types)
}

/// The byte a byte token's text stands for: `<0xXX>`, two hex digits.
pub fn byte_of(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The BPE merges (`tokenizer.ggml.merges`), each a pair split at its space;
/// none only where no token but a special one is longer than one character
/// (only merges make such tokens).
fn merges<'a>(g: &'a Gguf, tokens: &[&str], types: &[i32]) -> Result<Vec<(&'a str, &'a str)>> {
    let merges = strings(g, "tokenizer.ggml.merges")?
        .context("its metadata has no tokenizer.ggml.merges (a tokenizer is needed for text)")?
        .into_iter()
        .map(|m| {
            m.split_once(' ')
                .with_context(|| format!("tokenizer.ggml.merges holds '{m}', not a pair"))
        })
        .collect::<Result<Vec<_>>>()?;
    if merges.is_empty() {
        let special = |t: &i32| matches!(*t, CONTROL | USER_DEFINED);
        let made = tokens
            .iter()
            .zip(types)
            .filter(|(s, t)| !special(t) && s.chars().count() > 1)
            .count();
        if made > 0 {
            bail!(
                "tokenizer.ggml.merges is empty, but {made} of its tokens are more than one \
                 byte, which only merges make"
            );
        }
    }
    Ok(merges)
}

/// The metadata quantized_llama reads, as the checked sizes `d` give it and
/// in the types it reads (u32, f32), so that it reads nothing unchecked.
pub fn model_metadata(d: &Dims) -> HashMap<String, Value> {
    let u = |v: usize| Value::U32(v as u32);
    [
        ("general.architecture", Value::String("llama".into())),
        ("llama.block_count", u(d.layers)),
        ("llama.embedding_length", u(d.hidden)),
        ("llama.feed_forward_length", u(d.mlp)),
        ("llama.attention.head_count", u(d.heads)),
        ("llama.attention.head_count_kv", u(d.kv_heads)),
        ("llama.rope.dimension_count", u(d.head_dim)),
        ("llama.context_length", u(d.context)),
        ("llama.rope.freq_base", Value::F32(d.rope_theta as f32)),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(d.rms_eps as f32),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
