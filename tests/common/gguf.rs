//! A tiny Llama GGUF as the tests write it, field by field: every header
//! field, metadata value and tensor description is a value a test can change
//! before the bytes are laid out (a count that lies, a key of another type,
//! an offset past the file), so the mutation test can break one field at a
//! time. The layout is GGUF version 3's (ggml's gguf.md), as llama.cpp
//! writes it; unchanged, it is the 2-layer Llama that tests/generate.rs runs.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// One metadata value as it is written: its GGUF type id, then its bytes.
#[derive(Clone, Debug)]
pub enum Raw {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(u8),
    Str(Vec<u8>),
    /// Element type, then the elements (each written without its type).
    Arr(u32, Vec<Raw>),
    /// Any type id with any payload (a lying type, a cut value).
    Bytes(u32, Vec<u8>),
}

impl Raw {
    pub fn str(s: &str) -> Self {
        Raw::Str(s.as_bytes().to_vec())
    }

    pub fn type_id(&self) -> u32 {
        match self {
            Raw::U32(_) => 4,
            Raw::I32(_) => 5,
            Raw::F32(_) => 6,
            Raw::Bool(_) => 7,
            Raw::Str(_) => 8,
            Raw::Arr(..) => 9,
            Raw::Bytes(t, _) => *t,
        }
    }

    fn payload(&self, out: &mut Vec<u8>) {
        match self {
            Raw::U32(v) => out.extend(v.to_le_bytes()),
            Raw::I32(v) => out.extend(v.to_le_bytes()),
            Raw::F32(v) => out.extend(v.to_le_bytes()),
            Raw::Bool(v) => out.push(*v),
            Raw::Str(s) => {
                out.extend((s.len() as u64).to_le_bytes());
                out.extend(s);
            }
            Raw::Arr(t, items) => {
                out.extend(t.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for i in items {
                    i.payload(out);
                }
            }
            Raw::Bytes(_, b) => out.extend(b),
        }
    }
}

/// A tensor's description and its bytes.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: Vec<u8>,
    /// ggml's order: the row's width first.
    pub dims: Vec<u64>,
    pub ggml_type: u32,
    pub offset: u64,
    pub data: Vec<u8>,
}

/// A whole file: header fields, metadata, tensors.
#[derive(Clone, Debug)]
pub struct Spec {
    pub magic: [u8; 4],
    pub version: u32,
    /// The counts the header states (the real ones unless a test lies).
    pub n_tensors: Option<u64>,
    pub n_kv: Option<u64>,
    pub kvs: Vec<(String, Raw)>,
    pub tensors: Vec<TensorSpec>,
}

/// GPT-2's byte-to-character map (`bytes_to_unicode`): the vocabulary of a
/// byte-level BPE without merges.
pub fn byte_chars() -> Vec<String> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    let mut out = vec![String::new(); 256];
    for (b, c) in bs.iter().zip(cs) {
        out[*b as usize] = char::from_u32(c).unwrap().to_string();
    }
    out
}

pub const TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Alignment of the tensor data (GGUF's default).
const ALIGN: usize = 32;

impl Spec {
    /// A tiny Llama: 2 layers, hidden 64, 4 heads, 2 key/value heads, MLP
    /// 128, 256 byte tokens, the tokens `merges` make, two control tokens,
    /// context 64; `arch` its architecture (qwen2, qwen3 and gemma3 with
    /// their keys and their tensors, Gemma 3's windows of 32; any other name
    /// a Llama's keys under it); weights random (never zero) in `dtype`, the
    /// vectors and the embedding in f32.
    pub fn tiny(arch: &str, dtype: GgmlDType, merges: &[(&str, &str)]) -> Self {
        let (layers, h, heads, kv, m) = (2usize, 64usize, 4usize, 2usize, 128usize);
        let p = match arch {
            "qwen2" | "qwen3" | "gemma3" => arch,
            _ => "llama",
        };
        let mut tokens = byte_chars();
        tokens.extend(merges.iter().map(|(a, b)| format!("{a}{b}")));
        tokens.extend(["<|im_start|>".to_string(), "<|im_end|>".to_string()]);
        let vocab = tokens.len();
        let mut types = vec![Raw::I32(1); vocab - 2];
        types.extend([Raw::I32(3), Raw::I32(3)]);
        let u = |v: usize| Raw::U32(v as u32);
        let kvs: Vec<(&str, Raw)> = vec![
            ("general.architecture", Raw::str(arch)),
            ("general.name", Raw::str("tiny")),
            ("tokenizer.ggml.model", Raw::str("gpt2")),
            (
                "tokenizer.ggml.tokens",
                Raw::Arr(8, tokens.iter().map(|t| Raw::str(t)).collect()),
            ),
            (
                "tokenizer.ggml.merges",
                Raw::Arr(
                    8,
                    merges
                        .iter()
                        .map(|(a, b)| Raw::str(&format!("{a} {b}")))
                        .collect(),
                ),
            ),
            ("tokenizer.ggml.token_type", Raw::Arr(5, types)),
            ("tokenizer.ggml.bos_token_id", u(vocab - 2)),
            ("tokenizer.ggml.eos_token_id", u(vocab - 1)),
            ("tokenizer.chat_template", Raw::str(TEMPLATE)),
        ];
        let mut kvs: Vec<(String, Raw)> =
            kvs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let sizes = [
            ("block_count", u(layers)),
            ("embedding_length", u(h)),
            ("feed_forward_length", u(m)),
            ("attention.head_count", u(heads)),
            ("attention.head_count_kv", u(kv)),
            ("rope.dimension_count", u(h / heads)),
            ("context_length", u(64)),
            ("rope.freq_base", Raw::F32(10000.0)),
            ("attention.layer_norm_rms_epsilon", Raw::F32(1e-5)),
        ];
        let mut sizes: Vec<(&str, Raw)> = sizes.into();
        if matches!(p, "qwen3" | "gemma3") {
            sizes.push(("attention.key_length", u(h / heads)));
        }
        if p == "gemma3" {
            sizes.push(("attention.sliding_window", u(32)));
        }
        kvs.splice(
            2..2,
            sizes.into_iter().map(|(k, v)| (format!("{p}.{k}"), v)),
        );
        let mut seed = 1.0f32;
        let mut t = |name: String, shape: &[usize], dt: GgmlDType| {
            seed += 1.0;
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|i| {
                    ((i as f32 * 0.37 + seed).sin() * 0.2)
                        + if shape.len() == 1 { 1.0 } else { 0.0 }
                })
                .collect();
            let q =
                QTensor::quantize(&Tensor::from_vec(v, shape, &Device::Cpu).unwrap(), dt).unwrap();
            TensorSpec {
                name: name.into_bytes(),
                dims: shape.iter().rev().map(|d| *d as u64).collect(),
                ggml_type: ggml_id(dt),
                offset: 0,
                data: q.data().unwrap().to_vec(),
            }
        };
        let mut tensors = vec![
            t("token_embd.weight".into(), &[vocab, h], GgmlDType::F32),
            t("output_norm.weight".into(), &[h], GgmlDType::F32),
        ];
        for l in 0..layers {
            for (name, shape) in [
                ("attn_norm", vec![h]),
                ("ffn_norm", vec![h]),
                ("attn_q", vec![h, h]),
                ("attn_k", vec![kv * 16, h]),
                ("attn_v", vec![kv * 16, h]),
                ("attn_output", vec![h, h]),
                ("ffn_gate", vec![m, h]),
                ("ffn_up", vec![m, h]),
                ("ffn_down", vec![h, m]),
            ] {
                let dt = if shape.len() == 1 {
                    GgmlDType::F32
                } else {
                    dtype
                };
                tensors.push(t(format!("blk.{l}.{name}.weight"), &shape, dt));
            }
            let (q, k) = (h, kv * 16);
            let mut extra: Vec<(&str, usize)> = Vec::new();
            match p {
                "qwen2" => {
                    extra.extend([("attn_q.bias", q), ("attn_k.bias", k), ("attn_v.bias", k)])
                }
                "qwen3" => extra.extend([("attn_q_norm.weight", 16), ("attn_k_norm.weight", 16)]),
                "gemma3" => extra.extend([
                    ("attn_q_norm.weight", 16),
                    ("attn_k_norm.weight", 16),
                    ("post_attention_norm.weight", h),
                    ("post_ffw_norm.weight", h),
                ]),
                _ => {}
            }
            for (name, n) in extra {
                tensors.push(t(format!("blk.{l}.{name}"), &[n], GgmlDType::F32));
            }
        }
        let mut spec = Spec {
            magic: *b"GGUF",
            version: 3,
            n_tensors: None,
            n_kv: None,
            kvs,
            tensors,
        };
        spec.lay_out();
        spec
    }

    /// Each tensor's offset where [`Spec::bytes`] lays its data: one after
    /// another, each aligned (after tensors were added or removed).
    pub fn lay_out(&mut self) {
        let mut offset = 0u64;
        for t in &mut self.tensors {
            t.offset = offset;
            offset += t.data.len().next_multiple_of(ALIGN) as u64;
        }
    }

    /// The metadata value at `key`, to change it.
    pub fn kv(&mut self, key: &str) -> &mut Raw {
        &mut self
            .kvs
            .iter_mut()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("no {key}"))
            .1
    }

    /// Sets `key` to `value`, adding it if it is missing.
    pub fn set(&mut self, key: &str, value: Raw) {
        match self.kvs.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = value,
            None => self.kvs.push((key.to_string(), value)),
        }
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) {
        self.kvs.retain(|(k, _)| k != key);
    }

    /// The file's bytes, and where its header (everything before the tensor
    /// data) ends.
    pub fn bytes(&self) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        out.extend(self.magic);
        out.extend(self.version.to_le_bytes());
        out.extend(
            self.n_tensors
                .unwrap_or(self.tensors.len() as u64)
                .to_le_bytes(),
        );
        out.extend(self.n_kv.unwrap_or(self.kvs.len() as u64).to_le_bytes());
        for (k, v) in &self.kvs {
            out.extend((k.len() as u64).to_le_bytes());
            out.extend(k.as_bytes());
            out.extend(v.type_id().to_le_bytes());
            v.payload(&mut out);
        }
        for t in &self.tensors {
            out.extend((t.name.len() as u64).to_le_bytes());
            out.extend(&t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.ggml_type.to_le_bytes());
            out.extend(t.offset.to_le_bytes());
        }
        let header = out.len();
        out.resize(header.next_multiple_of(ALIGN), 0);
        // The data as laid out before any field was changed: each tensor at
        // the next aligned place, whatever its offset field now says.
        for t in &self.tensors {
            out.extend(&t.data);
            out.resize(out.len().next_multiple_of(ALIGN), 0);
        }
        (out, header)
    }

    /// Writes the file at `path`.
    pub fn write(&self, path: &std::path::Path) {
        std::fs::write(path, self.bytes().0).unwrap();
    }
}

/// ggml's id of a type (ggml.h's `enum ggml_type`).
pub fn ggml_id(t: GgmlDType) -> u32 {
    match t {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q5_1 => 7,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q8_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 11,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        GgmlDType::Q8K => 15,
        GgmlDType::BF16 => 30,
    }
}
