//! What a model GGUF's metadata must say, checked before any tensor is read:
//! its architecture, one the suite runs; every key this program or
//! candle-transformers' model of that architecture reads, by its type, its
//! range and its relation to the others and to the tensors; every tensor the
//! architecture needs, at the shape those sizes give (the tokenizer's
//! keys are [`super::vocab`]'s). A count read from the
//! metadata is bounded by what the file holds before anything is built from
//! it (the layers by the tensors there are, the widths by the embedding's
//! shape). Each refusal is one clause naming the key or the tensor.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Value;

use super::read::Gguf;
use super::{type_name, READ_TYPES};
use crate::model::{Arch, Config};

/// An unsigned integer at `key` (any of GGUF's integer types, not negative),
/// at most u32's range: quantized_llama reads these as u32.
pub(super) fn uint(g: &Gguf, key: &str) -> Result<Option<usize>> {
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

pub(super) fn required(g: &Gguf, key: &str) -> Result<usize> {
    let n = uint(g, key)?.with_context(|| format!("its metadata has no {key}"))?;
    if n == 0 {
        bail!("{key} is 0");
    }
    Ok(n)
}

/// A float at `key` (f32 or f64), finite and in `range` when present.
pub(super) fn float(
    g: &Gguf,
    key: &str,
    ok: impl Fn(f64) -> bool,
    want: &str,
) -> Result<Option<f64>> {
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
pub(super) fn kind(v: &Value) -> &'static str {
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

/// The model's configuration from its metadata and its embedding's shape:
/// its architecture (one the suite runs, else refused naming it), each size
/// in range and consistent with the others, read under the architecture's
/// prefix (`llama.block_count`, `gemma3.block_count`).
pub fn config(g: &Gguf) -> Result<Config> {
    let name = string(g, "general.architecture")?.unwrap_or("(none)");
    let Some(arch) = Arch::of_name(name) else {
        bail!(
            "it is a '{name}' model (general.architecture); generate runs {} files",
            Arch::names()
        );
    };
    let p = arch.name();
    let key = |k: &str| format!("{p}.{k}");
    if uint(g, &key("expert_count"))?.is_some_and(|n| n > 0) {
        bail!("it is a mixture of experts ({p}.expert_count); generate runs dense models");
    }
    let embd = g
        .tensor("token_embd.weight")
        .context("it has no tensor token_embd.weight, which every model here needs")?;
    let [vocab, width] = embd.dims[..] else {
        bail!("tensor token_embd.weight is {:?}, not a matrix", embd.dims);
    };
    let hidden = required(g, &key("embedding_length"))?;
    if hidden != width {
        bail!("{p}.embedding_length is {hidden}, its token_embd.weight rows are {width} wide");
    }
    let (heads, kv_heads, head_dim) = heads(g, arch, hidden)?;
    let layers = required(g, &key("block_count"))?;
    // Bounded by the file before the list of expected tensors is built: a
    // layer holds its vectors and seven projections.
    if layers > g.tensors.len() / 9 {
        bail!(
            "{p}.block_count is {layers}, but the file holds {} tensors (9 or more a layer)",
            g.tensors.len()
        );
    }
    let max = super::max_positions(arch);
    let context = match uint(g, &key("context_length"))? {
        Some(0) => bail!("{p}.context_length is 0"),
        Some(n) => n.min(max),
        None => max,
    };
    let theta = |k: &str| {
        float(
            g,
            &key(k),
            |v| v > 0.0 && v <= f32::MAX as f64,
            "above 0 (and an f32)",
        )
    };
    let rope_theta = theta("rope.freq_base")?.unwrap_or(10_000.0);
    let rms_eps = float(
        g,
        &key("attention.layer_norm_rms_epsilon"),
        |v| v > 0.0 && v < 1.0,
        "between 0 and 1",
    )?
    .unwrap_or(1e-5);
    let window = match uint(g, &key("attention.sliding_window"))? {
        Some(0) => bail!("{p}.attention.sliding_window is 0"),
        None if arch == Arch::Gemma3 => {
            bail!("it has no {p}.attention.sliding_window, which Gemma 3's local layers need")
        }
        w => w,
    };
    not_run(g, arch, layers)?;
    Ok(Config {
        arch,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        mlp: required(g, &key("feed_forward_length"))?,
        vocab,
        context,
        rope_theta,
        rms_eps,
        tied: g.tensor("output.weight").is_none(),
        local: arch.local(window, theta("rope.local_freq_base")?),
    })
}

/// Refuses what a file may say that neither model here computes, so that it
/// is not run as another function: rotary scaling (`rope.scaling.type` and
/// `.factor`: Gemma 3 4B-27B's linear factor 8 on their global layers) and
/// Llama 3.1's rotary frequency factors (`rope_freqs.weight`), and Gemma 3
/// 27B, whose attention scale (`query_pre_attn_scalar`, 168) is in no key of
/// the file (llama.cpp knows it by its 62 layers).
fn not_run(g: &Gguf, arch: Arch, layers: usize) -> Result<()> {
    let p = arch.name();
    if let Some(t) = string(g, &format!("{p}.rope.scaling.type"))?.filter(|t| *t != "none") {
        bail!("{p}.rope.scaling.type is '{t}': rotary scaling is not applied here (neither the suite's decoder nor candle-transformers' model does)");
    }
    let factor = float(g, &format!("{p}.rope.scaling.factor"), |_| true, "a float")?;
    if let Some(f) = factor.filter(|f| *f != 1.0 && *f != 0.0) {
        bail!("{p}.rope.scaling.factor is {f}: rotary scaling is not applied here (neither the suite's decoder nor candle-transformers' model does)");
    }
    if g.tensor("rope_freqs.weight").is_some() {
        bail!("it holds rope_freqs.weight, rotary frequency factors (Llama 3.1 and later), which neither the suite's decoder nor candle-transformers' model applies");
    }
    if arch == Arch::Gemma3 && layers == 62 {
        bail!("it is Gemma 3 27B (62 layers), whose attention scale (query_pre_attn_scalar 168) no key of the file gives; the suite scales by the heads' width");
    }
    Ok(())
}

/// (query heads, key/value heads, a head's width) of an `arch` model
/// `hidden` wide: the width is hidden / heads, or the metadata's
/// `attention.key_length` where the architecture has wider heads (its value
/// length the same: the layers here hold one width for both).
fn heads(g: &Gguf, arch: Arch, hidden: usize) -> Result<(usize, usize, usize)> {
    let p = arch.name();
    let key = |k: &str| format!("{p}.{k}");
    let heads = required(g, &key("attention.head_count"))?;
    let kv_heads = match uint(g, &key("attention.head_count_kv"))? {
        Some(0) => bail!("{p}.attention.head_count_kv is 0"),
        Some(n) => n,
        None => heads,
    };
    if !heads.is_multiple_of(kv_heads) {
        bail!(
            "its heads ({heads} query, {p}.attention.head_count; {kv_heads} key/value, \
             .head_count_kv): the key/value heads do not divide the query heads"
        );
    }
    let key_length = uint(g, &key("attention.key_length"))?;
    let head_dim = match (arch.features().key_length, key_length) {
        (_, Some(0)) => bail!("{p}.attention.key_length is 0"),
        (true, Some(n)) => n,
        (false, Some(n)) if !hidden.is_multiple_of(heads) || n != hidden / heads => bail!(
            "{p}.attention.key_length is {n}, not its width {hidden} over its {heads} heads: \
             candle-transformers' {p} model takes heads of hidden / heads"
        ),
        _ if hidden.is_multiple_of(heads) => hidden / heads,
        _ => bail!("its {heads} heads ({p}.attention.head_count) do not divide its width {hidden}"),
    };
    if let Some(v) = uint(g, &key("attention.value_length"))? {
        if v != head_dim {
            bail!("{p}.attention.value_length is {v}, its keys {head_dim} wide: not supported");
        }
    }
    if !head_dim.is_multiple_of(2) {
        bail!("its heads are {head_dim} wide; rotary embedding turns pairs, so an even width");
    }
    // Missing, it is the head's width (llama.cpp's default for n_rot).
    if let Some(rope) = uint(g, &key("rope.dimension_count"))? {
        if rope != head_dim {
            bail!(
                "{p}.rope.dimension_count is {rope}: rotary embedding over part of a head's \
                 {head_dim} dimensions is not supported"
            );
        }
    }
    Ok((heads, kv_heads, head_dim))
}

/// Every tensor of a type read here, and every tensor a model of `d` needs
/// at its shape.
pub fn tensors(g: &Gguf, d: &Config) -> Result<()> {
    for t in &g.tensors {
        if !READ_TYPES.contains(&t.dtype) {
            bail!(
                "tensor {} is stored as {}, which this program does not read",
                t.name,
                type_name(t.dtype)
            );
        }
    }
    let want = d.tensors();
    for (name, shape) in &want {
        let t = g.tensor(name).with_context(|| {
            format!(
                "it has no tensor {name}, which a {} model needs",
                d.arch.name()
            )
        })?;
        if t.dims != *shape {
            bail!(
                "tensor {name} is {:?}, its metadata's sizes make it {shape:?}",
                t.dims
            );
        }
    }
    // A tensor the model does not use is a part of it neither model here
    // computes (a feature of another variant): refused, not run without it.
    if let Some(t) = g
        .tensors
        .iter()
        .find(|t| !want.iter().any(|(n, _)| *n == t.name))
    {
        bail!(
            "it holds tensor {}, which a {} model here does not use: a part of the model \
             neither the suite's decoder nor candle-transformers' computes",
            t.name,
            d.arch.name()
        );
    }
    Ok(())
}

/// An array of strings at `key`.
pub(super) fn strings<'a>(g: &'a Gguf, key: &str) -> Result<Option<Vec<&'a str>>> {
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

/// The metadata candle-transformers' model of `d`'s architecture reads, as
/// the checked sizes give it and in the types it reads (u32, f32), so that
/// it reads nothing unchecked. Keys one model does not read are ignored by it.
pub fn model_metadata(d: &Config) -> HashMap<String, Value> {
    let p = d.arch.name();
    let u = |v: usize| Value::U32(v as u32);
    let f = |v: f64| Value::F32(v as f32);
    let mut md: Vec<(String, Value)> = [
        ("block_count", u(d.layers)),
        ("embedding_length", u(d.hidden)),
        ("feed_forward_length", u(d.mlp)),
        ("attention.head_count", u(d.heads)),
        ("attention.head_count_kv", u(d.kv_heads)),
        ("attention.key_length", u(d.head_dim)),
        ("attention.value_length", u(d.head_dim)),
        ("rope.dimension_count", u(d.head_dim)),
        ("context_length", u(d.context)),
        ("rope.freq_base", f(d.rope_theta)),
        ("attention.layer_norm_rms_epsilon", f(d.rms_eps)),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{p}.{k}"), v))
    .collect();
    if let Some(w) = &d.local {
        md.push((format!("{p}.attention.sliding_window"), u(w.window)));
        md.push((format!("{p}.attention.sliding_window_type"), u(w.every)));
        md.push((format!("{p}.rope.local_freq_base"), f(w.rope_theta)));
    }
    md.push(("general.architecture".into(), Value::String(p.into())));
    md.into_iter().collect()
}
