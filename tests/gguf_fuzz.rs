//! The GGUF reader as a hostile file meets it: a tiny valid Llama GGUF
//! (tests/common/gguf.rs) broken one field at a time (every header field,
//! every metadata key's presence, type and value, every tensor's dimensions,
//! type, offset and name) and one byte at a time (seeded), plus the cases
//! found by hand (issue 29: alignment 0, a FIFO, a folder, 2^40 layers, a
//! template that loops or writes 9 MB or builds 90 MB, an offset near 2^64, ids past the
//! vocabulary, an empty merges list, a bad epsilon, a string freq_base, an
//! element count that overflows, the output naming the model), and a
//! SentencePiece-style vocabulary, whole and broken (its scores of the wrong
//! length or type, a NaN score, a token type out of range). Each case
//! runs the real `generate` under a time limit and must end as documented
//! (docs/cli.md): exit 0, 1, 2 or 3, at most one `error:` line, no panic, no
//! file left by a refused run, and the model file unchanged. Cases run on
//! every core at once; no time is asserted but the per-case limit.
//! `CANDLE_LAB_FUZZ_SEED` and `CANDLE_LAB_FUZZ_BYTES` change the byte cases'
//! seed and count, for a longer hunt than `just test`'s.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use candle_core::quantized::GgmlDType;
use common::gguf::{Raw, Spec};

/// A case must end well within this (a refusal takes milliseconds, a whole
/// tiny run under a second in a dev build).
const LIMIT: Duration = Duration::from_secs(30);

/// The run each case gets: one row, the shortest tests.
const ARGS: [&str; 16] = [
    "--ladder-max-mib",
    "1",
    "--device",
    "cpu",
    "--dtypes",
    "stored",
    "--tokens",
    "2",
    "--pp-tokens",
    "2",
    "--iters",
    "1",
    "--warmup",
    "0",
    "--prompt",
    "hi",
];

/// One file to try, and what must come of it.
struct Case {
    name: String,
    bytes: Vec<u8>,
    expect: Expect,
}

#[derive(Clone, Copy)]
enum Expect {
    /// Anything documented (the mutations: most are refused, some run).
    Any,
    /// Refused before any work (exit 1), the line holding this.
    Refused(&'static str),
    /// Runs (exit 0).
    Runs,
}

fn case(name: impl Into<String>, spec: &Spec, expect: Expect) -> Case {
    Case {
        name: name.into(),
        bytes: spec.bytes().0,
        expect,
    }
}

fn tiny() -> Spec {
    Spec::tiny("llama", GgmlDType::Q8_0, &[])
}

/// The tiny file with a SentencePiece-style vocabulary (tokenizer.ggml.model
/// "llama"): a byte token for each byte but 0xF5-0xF7 (never in UTF-8),
/// whose places hold the pieces "h", "i" and "hi", then the two control
/// tokens; a score per token, and no merges.
fn spm() -> Spec {
    let mut s = tiny();
    let mut tokens: Vec<String> = (0..256).map(|b| format!("<0x{b:02X}>")).collect();
    let mut types = vec![6; 256];
    let mut scores = vec![0.0f32; 258];
    for (i, (piece, score)) in [("h", -1.0), ("i", -1.0), ("hi", -2.0)]
        .into_iter()
        .enumerate()
    {
        tokens[0xF5 + i] = piece.to_string();
        types[0xF5 + i] = 1;
        scores[0xF5 + i] = score;
    }
    tokens.extend(["<|im_start|>".to_string(), "<|im_end|>".to_string()]);
    types.extend([3, 3]);
    *s.kv("tokenizer.ggml.model") = Raw::str("llama");
    *s.kv("tokenizer.ggml.tokens") = Raw::Arr(8, tokens.iter().map(|t| Raw::str(t)).collect());
    *s.kv("tokenizer.ggml.token_type") = Raw::Arr(5, types.into_iter().map(Raw::I32).collect());
    s.remove("tokenizer.ggml.merges");
    s.set(
        "tokenizer.ggml.scores",
        Raw::Arr(6, scores.into_iter().map(Raw::F32).collect()),
    );
    s
}

/// Files of the other architectures, as written and broken one way each:
/// their own keys and tensors, and what the suite refuses rather than run as
/// another function (rotary scaling, frequency factors, a tensor no model
/// here uses, a Gemma 3 without its window).
fn arch_cases() -> Vec<Case> {
    use Expect::*;
    let with = |arch: &str, f: &dyn Fn(&mut Spec)| {
        let mut s = Spec::tiny(arch, GgmlDType::Q8_0, &[]);
        f(&mut s);
        s
    };
    let drop_tensor = |name: &'static str| {
        move |s: &mut Spec| {
            s.tensors.retain(|t| t.name != name.as_bytes());
            s.lay_out();
        }
    };
    let add_tensor = |name: &'static str| {
        move |s: &mut Spec| {
            let mut t = s.tensors[1].clone();
            t.name = name.as_bytes().to_vec();
            s.tensors.push(t);
            s.lay_out();
        }
    };
    vec![
        case("a qwen2 file", &with("qwen2", &|_| {}), Runs),
        case("a qwen3 file", &with("qwen3", &|_| {}), Runs),
        case("a gemma3 file", &with("gemma3", &|_| {}), Runs),
        case(
            "qwen2 without a bias",
            &with("qwen2", &drop_tensor("blk.1.attn_k.bias")),
            Refused("it has no tensor blk.1.attn_k.bias, which a qwen2 model needs"),
        ),
        case(
            "gemma3 without a head norm",
            &with("gemma3", &drop_tensor("blk.0.attn_q_norm.weight")),
            Refused("it has no tensor blk.0.attn_q_norm.weight, which a gemma3 model needs"),
        ),
        case(
            "gemma3 without its window",
            &with("gemma3", &|s| s.remove("gemma3.attention.sliding_window")),
            Refused("it has no gemma3.attention.sliding_window"),
        ),
        case(
            "qwen3 key_length 0",
            &with("qwen3", &|s| {
                s.set("qwen3.attention.key_length", Raw::U32(0))
            }),
            Refused("qwen3.attention.key_length is 0"),
        ),
        case(
            "a llama key_length candle's model would not take",
            &with("llama", &|s| {
                s.set("llama.attention.key_length", Raw::U32(32))
            }),
            Refused("llama.attention.key_length is 32, not its width 64 over its 4 heads"),
        ),
        case(
            "rotary scaling",
            &with("gemma3", &|s| {
                s.set("gemma3.rope.scaling.type", Raw::str("linear"))
            }),
            Refused("gemma3.rope.scaling.type is 'linear': rotary scaling is not applied here"),
        ),
        case(
            "rotary frequency factors",
            &with("llama", &add_tensor("rope_freqs.weight")),
            Refused("it holds rope_freqs.weight"),
        ),
        case(
            "a tensor no model here uses",
            &with("qwen3", &add_tensor("blk.0.attn_sinks")),
            Refused("it holds tensor blk.0.attn_sinks, which a qwen3 model here does not use"),
        ),
    ]
}

/// An SPM vocabulary broken one way, and the line that refuses it.
fn spm_cases() -> Vec<Case> {
    use Expect::*;
    let with = |f: &dyn Fn(&mut Spec)| {
        let mut s = spm();
        f(&mut s);
        s
    };
    let set_item = |key: &'static str, i: usize, v: Raw| {
        move |s: &mut Spec| {
            if let Raw::Arr(_, items) = s.kv(key) {
                items[i] = v.clone();
            }
        }
    };
    vec![
        case("an SPM vocabulary", &spm(), Runs),
        case(
            "SPM scores of the wrong length",
            &with(&|s| *s.kv("tokenizer.ggml.scores") = Raw::Arr(6, vec![Raw::F32(0.0); 257])),
            Refused("tokenizer.ggml.scores is an array of 257 values, not one f32 per token (258)"),
        ),
        case(
            "SPM scores of i32s",
            &with(&|s| *s.kv("tokenizer.ggml.scores") = Raw::Arr(5, vec![Raw::I32(0); 258])),
            Refused("tokenizer.ggml.scores holds an i32, not f32s"),
        ),
        case(
            "an SPM score NaN",
            &with(&set_item("tokenizer.ggml.scores", 3, Raw::F32(f32::NAN))),
            Refused("tokenizer.ggml.scores holds NaN for token 3; a score must be finite"),
        ),
        case(
            "SPM without scores",
            &with(&|s| s.remove("tokenizer.ggml.scores")),
            Refused("its metadata has no tokenizer.ggml.scores"),
        ),
        case(
            "a token type out of range",
            &with(&set_item("tokenizer.ggml.token_type", 4, Raw::I32(9))),
            Refused("tokenizer.ggml.token_type holds 9 for token 4; GGUF's token types are 0 to 6"),
        ),
        case(
            "a byte token that is not <0xXX>",
            &with(&set_item("tokenizer.ggml.token_type", 0xF7, Raw::I32(6))),
            Refused("token 247 is a byte token (tokenizer.ggml.token_type 6), but it reads \"hi\""),
        ),
    ]
}

fn u64_raw(v: u64) -> Raw {
    Raw::Bytes(10, v.to_le_bytes().to_vec())
}

/// The cases found by hand, each with the line it must give.
fn named() -> Vec<Case> {
    use Expect::*;
    let mut out = Vec::new();
    // Issue 29's file (its Python one-liner; 57 bytes): no tensors,
    // general.alignment = 0.
    let mut a0 = b"GGUF".to_vec();
    a0.extend(3u32.to_le_bytes());
    a0.extend(0u64.to_le_bytes());
    a0.extend(1u64.to_le_bytes());
    a0.extend(17u64.to_le_bytes());
    a0.extend(b"general.alignment");
    a0.extend(4u32.to_le_bytes());
    a0.extend(0u32.to_le_bytes());
    assert_eq!(a0.len(), 57);
    out.push(Case {
        name: "alignment 0 (issue 29's file)".into(),
        bytes: a0,
        expect: Refused("general.alignment is 0"),
    });
    let with = |f: &dyn Fn(&mut Spec)| {
        let mut s = tiny();
        f(&mut s);
        s
    };
    let mut add = |name: &str, s: Spec, e: Expect| out.push(case(name, &s, e));
    add(
        "alignment 3",
        with(&|s| s.set("general.alignment", Raw::U32(3))),
        Refused("general.alignment is 3"),
    );
    add(
        "an offset off the alignment",
        with(&|s| s.tensors[2].offset += 16),
        Refused("is not a multiple of the alignment 32"),
    );
    add(
        "2^40 layers",
        with(&|s| *s.kv("llama.block_count") = u64_raw(1 << 40)),
        Refused("llama.block_count is 1099511627776, outside"),
    );
    add(
        "a million layers",
        with(&|s| *s.kv("llama.block_count") = Raw::U32(1_000_000)),
        Refused("llama.block_count is 1000000, but the file holds 20 tensors"),
    );
    add(
        "0 layers",
        with(&|s| *s.kv("llama.block_count") = Raw::U32(0)),
        Refused("llama.block_count is 0"),
    );
    add(
        "a template of loops",
        with(&|s| {
            *s.kv("tokenizer.chat_template") = Raw::str(
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            )
        }),
        Refused("runs past 200000 steps"),
    );
    add(
        "a template of 9 MB",
        with(&|s| *s.kv("tokenizer.chat_template") = Raw::str("{{ 'ab ' * 3000000 }}")),
        Refused("more than the model's context could hold"),
    );
    // Past the template's working memory (issue 52): refused before it is written.
    add(
        "a template of 90 MB",
        with(&|s| *s.kv("tokenizer.chat_template") = Raw::str("{{ 'ab ' * 30000000 }}")),
        Refused("its chat template needs more than 64.0 MiB of memory"),
    );
    add(
        "an offset near 2^64",
        with(&|s| s.tensors[3].offset = u64::MAX - 31),
        Refused("ends past the file"),
    );
    add(
        "no rope.dimension_count (the head's width, as llama.cpp)",
        with(&|s| s.remove("llama.rope.dimension_count")),
        Runs,
    );
    add(
        "bos past the vocabulary",
        with(&|s| *s.kv("tokenizer.ggml.bos_token_id") = Raw::U32(9999)),
        Refused("tokenizer.ggml.bos_token_id is 9999, past its vocabulary"),
    );
    add(
        "eos past the vocabulary",
        with(&|s| *s.kv("tokenizer.ggml.eos_token_id") = Raw::U32(258)),
        Refused("tokenizer.ggml.eos_token_id is 258, past its vocabulary"),
    );
    let merged = || Spec::tiny("llama", GgmlDType::Q8_0, &[("h", "i"), ("u", "s")]);
    add("merges that make tokens", merged(), Runs);
    let mut empty = merged();
    *empty.kv("tokenizer.ggml.merges") = Raw::Arr(8, Vec::new());
    add(
        "an empty merges list",
        empty,
        Refused("tokenizer.ggml.merges is empty, but 2 of its tokens"),
    );
    for eps in [0.0, -1.0, f32::NAN] {
        add(
            &format!("rms epsilon {eps}"),
            with(&|s| *s.kv("llama.attention.layer_norm_rms_epsilon") = Raw::F32(eps)),
            Refused("llama.attention.layer_norm_rms_epsilon is"),
        );
    }
    add(
        "freq_base a string",
        with(&|s| *s.kv("llama.rope.freq_base") = Raw::str("10000")),
        Refused("llama.rope.freq_base is a string, not a float"),
    );
    add(
        "an element count that overflows",
        with(&|s| s.tensors[5].dims = vec![1 << 32, 1 << 32, 1 << 32]),
        Refused("element count overflows"),
    );
    add(
        "a key twice",
        with(&|s| s.kvs.push(("llama.block_count".into(), Raw::U32(2)))),
        Refused("holds llama.block_count twice"),
    );
    add(
        "a tensor twice",
        with(&|s| {
            let t = s.tensors[0].clone();
            s.tensors.push(t)
        }),
        Refused("describes tensor token_embd.weight twice"),
    );
    add(
        "two tensors overlapping",
        with(&|s| s.tensors[4].offset = s.tensors[3].offset),
        Refused("overlap in the file"),
    );
    add(
        "a bool of 2",
        with(&|s| s.set("tokenizer.ggml.add_space_prefix", Raw::Bool(2))),
        Refused("a bool of byte 2"),
    );
    add(
        "version 1",
        with(&|s| s.version = 1),
        Refused("GGUF version 1"),
    );
    add(
        "a mixture of experts",
        with(&|s| s.set("llama.expert_count", Raw::U32(8))),
        Refused("mixture of experts"),
    );
    out
}

/// A change to one tensor's description.
type Edit = Box<dyn Fn(&mut common::gguf::TensorSpec)>;

/// Every field broken in turn.
fn fields() -> Vec<Case> {
    let base = tiny();
    let mut out = Vec::new();
    let mut add = |name: String, s: Spec| out.push(case(name, &s, Expect::Any));
    let real_t = base.tensors.len() as u64;
    let real_kv = base.kvs.len() as u64;
    for n in [0, real_t - 1, real_t + 1, 1 << 62, u64::MAX] {
        let mut s = base.clone();
        s.n_tensors = Some(n);
        add(format!("tensor count {n}"), s);
    }
    for n in [0, real_kv - 1, real_kv + 1, 1 << 62, u64::MAX] {
        let mut s = base.clone();
        s.n_kv = Some(n);
        add(format!("metadata count {n}"), s);
    }
    for v in [0, 2, 4, u32::MAX] {
        let mut s = base.clone();
        s.version = v;
        add(format!("version {v}"), s);
    }
    for m in [*b"GGUG", *b"FUGG", [0; 4]] {
        let mut s = base.clone();
        s.magic = m;
        add(format!("magic {m:?}"), s);
    }
    // Every key of the tiny file, and the SPM file's own.
    let spm = spm();
    let spm_keys = [
        "tokenizer.ggml.model",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
    ];
    let keys = base
        .kvs
        .iter()
        .enumerate()
        .map(|(i, kv)| ("", &base, i, kv))
        .chain(
            spm.kvs
                .iter()
                .enumerate()
                .filter(|(_, (k, _))| spm_keys.contains(&k.as_str()))
                .map(|(i, kv)| ("SPM ", &spm, i, kv)),
        );
    for (tag, base, i, (key, value)) in keys {
        let key = format!("{tag}{key}");
        let mut s = base.clone();
        s.kvs.remove(i);
        add(format!("{key} missing"), s);
        let mut payload = Vec::new();
        value_payload(value, &mut payload);
        for t in 0..=13u32 {
            if t == value.type_id() {
                continue;
            }
            let mut s = base.clone();
            s.kvs[i].1 = Raw::Bytes(t, payload.clone());
            add(format!("{key} read as type {t}"), s);
        }
        let values: Vec<Raw> = match value {
            Raw::U32(_) => vec![
                Raw::U32(0),
                Raw::U32(1),
                Raw::U32(1 << 31),
                Raw::U32(u32::MAX),
            ],
            Raw::F32(_) => vec![Raw::F32(0.0), Raw::F32(f32::INFINITY), Raw::F32(1e30)],
            Raw::Str(_) => vec![
                Raw::Str(Vec::new()),
                Raw::Bytes(8, (1u64 << 40).to_le_bytes().to_vec()),
                Raw::Str(vec![0xff, 0xfe, 0]),
            ],
            Raw::Arr(t, items) => vec![
                Raw::Arr(*t, Vec::new()),
                Raw::Arr(*t, items.iter().take(1).cloned().collect()),
                Raw::Bytes(
                    9,
                    [
                        t.to_le_bytes().to_vec(),
                        (1u64 << 62).to_le_bytes().to_vec(),
                    ]
                    .concat(),
                ),
                Raw::Arr(
                    9,
                    vec![Raw::Arr(*t, items.iter().take(1).cloned().collect())],
                ),
            ],
            _ => Vec::new(),
        };
        for (j, v) in values.into_iter().enumerate() {
            let mut s = base.clone();
            s.kvs[i].1 = v;
            add(format!("{key} value {j}"), s);
        }
    }
    for (i, t) in base.tensors.iter().enumerate().step_by(3) {
        let name = String::from_utf8_lossy(&t.name).into_owned();
        let mut edits: Vec<(String, Edit)> = vec![
            ("no dimensions".into(), Box::new(|t| t.dims.clear())),
            ("5 dimensions".into(), Box::new(|t| t.dims = vec![32; 5])),
            ("a 0 dimension".into(), Box::new(|t| t.dims[0] = 0)),
            ("twice as wide".into(), Box::new(|t| t.dims[0] *= 2)),
            ("a row of 33".into(), Box::new(|t| t.dims[0] = 33)),
            ("offset + 32".into(), Box::new(|t| t.offset += 32)),
            ("offset 2^40".into(), Box::new(|t| t.offset = 1 << 40)),
            ("no name".into(), Box::new(|t| t.name.clear())),
            (
                "a 100-byte name".into(),
                Box::new(|t| t.name = vec![b'x'; 100]),
            ),
        ];
        for ty in [1u32, 9, 15, 16, 40, u32::MAX] {
            edits.push((format!("type {ty}"), Box::new(move |t| t.ggml_type = ty)));
        }
        for (what, edit) in edits {
            let mut s = base.clone();
            edit(&mut s.tensors[i]);
            add(format!("tensor {name}: {what}"), s);
        }
    }
    out
}

/// A value's bytes as written after its type.
fn value_payload(v: &Raw, out: &mut Vec<u8>) {
    let mut s = Spec {
        magic: *b"GGUF",
        version: 3,
        n_tensors: None,
        n_kv: None,
        kvs: vec![(String::new(), v.clone())],
        tensors: Vec::new(),
    };
    let (bytes, header) = std::mem::take(&mut s).bytes();
    // magic, version, two counts, the empty key's length, its type.
    out.extend(&bytes[4 + 4 + 8 + 8 + 8 + 4..header]);
}

impl Default for Spec {
    fn default() -> Self {
        tiny()
    }
}

/// Seeded byte changes and cuts in the header (where the structure is).
fn bytes_broken(seed: u64, n: usize) -> Vec<Case> {
    let (good, header) = tiny().bytes();
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::new();
    for k in 0..n {
        let mut b = good.clone();
        // Half near the front (header, counts, the sizes' keys), half anywhere
        // in the header (the vocabulary, the template, the tensors' table).
        let span = if k % 2 == 0 { 700.min(header) } else { header };
        let at = (next() % span as u64) as usize;
        let v = (next() & 0xff) as u8;
        b[at] = if b[at] == v { !v } else { v };
        out.push(Case {
            name: format!("byte {at} set to {v:#04x}"),
            bytes: b,
            expect: Expect::Any,
        });
    }
    for k in 0..12 {
        let at = (next() % good.len() as u64) as usize;
        let at = if k < 4 { at % header } else { at };
        out.push(Case {
            name: format!("cut at byte {at}"),
            bytes: good[..at].to_vec(),
            expect: Expect::Any,
        });
    }
    out
}

/// What a run ended as.
struct Ended {
    code: Option<i32>,
    stderr: String,
    elapsed: Duration,
}

/// Runs `generate` with `args` and `--output out`, killed past [`LIMIT`].
fn run(args: &[&str], out: &Path) -> Ended {
    let started = Instant::now();
    let mut child = Command::new(common::bin("generate"))
        .args(args)
        .arg("--output")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > LIMIT {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ended {
        code,
        stderr: reader.join().unwrap(),
        elapsed: started.elapsed(),
    }
}

/// Runs one case in `dir` (its own folder): its exit code, or what was wrong.
fn check(c: &Case, dir: &Path) -> Result<i32, String> {
    let model = dir.join("m.gguf");
    std::fs::write(&model, &c.bytes).unwrap();
    let out = dir.join("r.json");
    let mut args = ARGS.to_vec();
    args.extend(["--model", model.to_str().unwrap()]);
    let e = run(&args, &out);
    let errors: Vec<&str> = e
        .stderr
        .lines()
        .filter(|l| l.starts_with("error"))
        .collect();
    let fail = |why: &str| {
        Err(format!(
            "{}: {why} (exit {:?}, {:?})\n{}",
            c.name, e.code, e.elapsed, e.stderr
        ))
    };
    let Some(code) = e.code else {
        return fail("killed at the time limit: it hangs");
    };
    if e.stderr.contains("panicked") || e.stderr.contains("RUST_BACKTRACE") {
        return fail("it panicked");
    }
    if !(0..=3).contains(&code) {
        return fail("an undocumented exit code");
    }
    if errors.len() > usize::from(code != 0) {
        return fail("more than one error line");
    }
    if std::fs::read(&model).unwrap() != c.bytes {
        return fail("the model file changed");
    }
    let left: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| *p != model)
        .collect();
    match code {
        1 | 2 if !left.is_empty() => return fail(&format!("a refused run left {left:?}")),
        0 | 3 if !out.is_file() => return fail("a run that measured wrote no result"),
        _ => {}
    }
    if code == 1 && !errors[0].contains("m.gguf") {
        return fail("the refusal does not name the file");
    }
    match c.expect {
        Expect::Any => Ok(code),
        Expect::Runs if code == 0 => Ok(code),
        Expect::Refused(text) if code == 1 && errors[0].contains(text) => Ok(code),
        Expect::Runs => fail("expected to run"),
        Expect::Refused(text) => fail(&format!("expected a refusal saying {text:?}")),
    }
}

/// Runs every case on every core; returns the failures and the exits seen.
fn run_all(cases: &[Case]) -> (Vec<String>, [usize; 4]) {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let codes = Mutex::new([0usize; 4]);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(c) = cases.get(i) else { break };
                let dir = tempfile::tempdir().unwrap();
                match check(c, dir.path()) {
                    Err(why) => failures.lock().unwrap().push(why),
                    Ok(code) => codes.lock().unwrap()[code as usize] += 1,
                }
            });
        }
    });
    (failures.into_inner().unwrap(), codes.into_inner().unwrap())
}

#[test]
fn no_file_makes_generate_panic_hang_or_lose_a_file() {
    let seed = std::env::var("CANDLE_LAB_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut cases = named();
    cases.extend(spm_cases());
    cases.extend(arch_cases());
    let n_named = cases.len();
    cases.extend(fields());
    // CANDLE_LAB_FUZZ_BYTES: more byte cases for a longer hunt (120 in `just test`).
    let n_bytes = std::env::var("CANDLE_LAB_FUZZ_BYTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    cases.extend(bytes_broken(seed, n_bytes));
    let started = Instant::now();
    let (failures, codes) = run_all(&cases);
    eprintln!(
        "{} cases ({n_named} named, seed {seed:#x}) in {:.1} s; exits 0/1/2/3: {codes:?}",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    // The mutations reach both sides of the check: some files still run.
    assert!(codes[0] > 0 && codes[1] > 0, "exits 0/1/2/3: {codes:?}");
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}
