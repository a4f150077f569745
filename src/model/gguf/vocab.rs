//! A GGUF's tokenizer, checked before anything is built from it: its model
//! (GPT-2-style byte-level BPE, "gpt2", or SentencePiece-style, "llama"),
//! its tokens and their types, its merges (BPE) or scores (SPM), its special
//! ids and flags, each in range and consistent with the embedding's rows.
//! Each refusal is one clause naming the key.

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Value;

use super::check::{kind, string, strings, uint};
use super::read::Gguf;

/// GGUF's token types (llama.cpp's `llama_token_type`): 3 is a control token
/// (`<|im_start|>`), 4 a user-defined one; both match as whole special tokens.
/// 6 is a byte token (`<0x0A>`); 0 to 6 are all the types there are.
pub const CONTROL: i32 = 3;
pub const USER_DEFINED: i32 = 4;
const BYTE: i32 = 6;
const TOKEN_TYPES: std::ops::RangeInclusive<i32> = 0..=6;

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
    /// `tokenizer.ggml.pre`: the BPE's pre-tokenizer, by llama.cpp's name.
    pub pre: Option<&'a str>,
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
        pre: string(g, "tokenizer.ggml.pre")?,
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
