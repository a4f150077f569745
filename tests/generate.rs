//! The `generate` program as a user runs it, on tiny GGUF files written here
//! with candle's own GGUF writer (a 2-layer Llama with a byte-level
//! tokenizer and a chat template in its metadata): every row answers and is
//! measured, the file reads back; and every bad input is refused with one
//! line before any work (missing, truncated, non-GGUF, wrong architecture,
//! an unsupported tensor type, a prompt past the context, --tokens 0, no
//! model fetched); the random-weight path at the tiny shape, with its CSV and
//! chart, on the CPU and (`--features cuda`) on CUDA. The real model's run is
//! tests/generate_model.rs. No time is asserted.

mod common;
use common::{refused, run_result};

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// GPT-2's byte-to-character map (`bytes_to_unicode`): the vocabulary of a
/// byte-level BPE without merges.
fn byte_chars() -> Vec<String> {
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

const TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// A tiny Llama GGUF: 2 layers, hidden 64, 4 heads, 2 key/value heads, MLP
/// 128, 256 byte tokens and two control tokens, context 64; `arch` names its
/// architecture; weights random (never zero) in `dtype`.
fn tiny_gguf(dir: &Path, arch: &str, dtype: GgmlDType) -> PathBuf {
    let (layers, h, heads, kv, m) = (2usize, 64usize, 4usize, 2usize, 128usize);
    let mut tokens = byte_chars();
    tokens.extend(["<|im_start|>".to_string(), "<|im_end|>".to_string()]);
    let vocab = tokens.len();
    let mut types = vec![Value::I32(1); 256];
    types.extend([Value::I32(3), Value::I32(3)]);
    let u = |v: usize| Value::U32(v as u32);
    let md: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String(arch.into())),
        ("general.name", Value::String("tiny".into())),
        ("llama.block_count", u(layers)),
        ("llama.embedding_length", u(h)),
        ("llama.feed_forward_length", u(m)),
        ("llama.attention.head_count", u(heads)),
        ("llama.attention.head_count_kv", u(kv)),
        ("llama.rope.dimension_count", u(h / heads)),
        ("llama.context_length", u(64)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        ("tokenizer.ggml.merges", Value::Array(Vec::new())),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.bos_token_id", u(vocab - 2)),
        ("tokenizer.ggml.eos_token_id", u(vocab - 1)),
        ("tokenizer.chat_template", Value::String(TEMPLATE.into())),
    ];
    let mut seed = 1.0f32;
    let mut t = |shape: &[usize], dt: GgmlDType| {
        seed += 1.0;
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|i| {
                ((i as f32 * 0.37 + seed).sin() * 0.2) + if shape.len() == 1 { 1.0 } else { 0.0 }
            })
            .collect();
        QTensor::quantize(&Tensor::from_vec(v, shape, &Device::Cpu).unwrap(), dt).unwrap()
    };
    let mut tensors = vec![
        (
            "token_embd.weight".to_string(),
            t(&[vocab, h], GgmlDType::F32),
        ),
        ("output_norm.weight".to_string(), t(&[h], GgmlDType::F32)),
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
            tensors.push((format!("blk.{l}.{name}.weight"), t(&shape, dt)));
        }
    }
    let path = dir.join(format!("tiny-{arch}.gguf"));
    let mut f = std::fs::File::create(&path).unwrap();
    let md: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (*k, v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    gguf_file::write(&mut f, &md, &ts).unwrap();
    path
}

const QUICK: [&str; 8] = [
    "--tokens",
    "4",
    "--pp-tokens",
    "8",
    "--iters",
    "1",
    "--warmup",
    "0",
];

#[test]
fn every_row_of_a_tiny_model_answers_and_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_gguf(dir.path(), "llama", GgmlDType::Q8_0);
    let mut args = vec!["--device", "cpu", "--model", model.to_str().unwrap()];
    args.extend(["--dtypes", "stored,q4_1,fp32,fp16,bf16", "--prompt", "hi"]);
    args.extend(QUICK);
    let (json, out) = run_result("generate", &args);
    let g = &json["generate"];
    assert_eq!(g["model"]["source"], "file");
    assert_eq!(g["model"]["kv_heads"], 2);
    assert_eq!(g["model"]["tied_embeddings"], true);
    // The chat template, rendered: the user's message between the markers.
    assert_eq!(
        g["prompt"]["formatted"],
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = g["prompt"]["token_ids"].as_array().unwrap();
    assert_eq!(ids[0], 256, "<|im_start|> is one special token");
    // One byte a token (no merges) but for the three markers.
    assert_eq!(ids.len(), "user\nhi\nassistant\n".len() + 3);
    let rows = g["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["precision"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["q8_0 (stored)", "q4_1", "fp32", "fp16", "bf16"]);
    for r in rows {
        assert_eq!(r["status"], "ok", "{r}");
        let m = &r["measured"];
        let answer = m["answer"]["token_ids"].as_array().unwrap();
        assert!(!answer.is_empty() && answer.len() <= 4, "{m}");
        assert!(m["answer"]["text"].is_string());
        for k in [
            "pp_tokens_per_s",
            "tg_tokens_per_s",
            "tg_bound_tokens_per_s",
            "pp_gflop_per_s",
        ] {
            assert!(m[k].as_f64().unwrap() > 0.0, "{k}: {m}");
        }
        assert!(m["weight_bytes_per_token"].as_u64().unwrap() > 0);
        assert_eq!(m["parts"].as_array().unwrap().len(), 6);
        let vs = &m["vs_fp32"];
        if r["precision"] == "fp32" {
            assert_eq!(vs["tg"], 1.0);
            assert!(m["answer"]["differs_from_fp32_at"].is_null());
        }
    }
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["quantized", "quantized", "float", "float", "float"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("where a generated token's time goes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fp16 against fp32, whole model"),
        "{stdout}"
    );
}

#[test]
fn random_weights_at_a_named_shape_dry_run_on_cuda() {
    // The GPU call's step, checked without a GPU: flags, shape and rows.
    let out = common::run(
        "generate",
        &["--shape", "llama-3.2-1b", "--device", "cuda", "--dry-run"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in ["Q4_1", "Q8_0", "Tf32", "pp_tokens: 512", "tg_tokens: 128"] {
        assert!(stdout.contains(want), "{want}: {stdout}");
    }
}

/// The random-weight path end to end at the tiny shape on `device` (what the
/// GPU call's CPU rehearsal runs; on CUDA, the GPU bundle's check of the CUDA
/// path): every default row measured, and beside the JSON its CSV and its
/// chart, which names every row and draws each tg bound.
fn tiny_shape(device: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("g.json");
    let mut args = vec!["--device", device, "--shape", "tiny", "--kernels", "both"];
    args.extend(QUICK);
    let (json, out) = common::run_result_at(&json_path, "generate", &args);
    let g = &json["generate"];
    assert_eq!(g["model"]["source"], "random");
    assert_eq!(g["model"]["shape"], "tiny");
    assert!(g["prompt"]["user"].is_null());
    let rows = g["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["precision"].as_str().unwrap())
        .collect();
    // --kernels both: each row, then again on the suite's kernels (a
    // quantized row's: the lab's quantized path).
    let rows_of: &[&str] = if device == "cuda" {
        &["q4_1", "q8_0", "fp32", "tf32", "fp16", "bf16"]
    } else {
        &["q4_1", "q8_0", "fp32", "fp16", "bf16"]
    };
    let mut want = Vec::new();
    for f in rows_of {
        want.extend([f.to_string(), format!("{f} (lab kernels)")]);
    }
    assert_eq!(names, want);
    assert_eq!(g["kernels"], "both");
    for r in rows {
        let lab = r["precision"].as_str().unwrap().ends_with("(lab kernels)");
        assert_eq!(r["kernels"], if lab { "lab" } else { "candle" }, "{r}");
        let quantized = r["precision"].as_str().unwrap().starts_with('q');
        assert_eq!(
            r["path"],
            if quantized { "quantized" } else { "float" },
            "{r}"
        );
        assert_eq!(r["status"], "ok", "{r}");
        assert!(r["measured"]["answer"]["text"].is_null());
        assert!(r["measured"]["tg_bound_tokens_per_s"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(json["device"]["kind"], device);
    assert!(String::from_utf8_lossy(&out.stdout).contains("RANDOM WEIGHTS"));

    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["g.csv", "g.json", "g.svg"]);
    let svg = std::fs::read_to_string(dir.path().join("g.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for want in [
        "prompt processing (pp8)",
        "generation (tg4)",
        "RANDOM WEIGHTS",
    ] {
        assert!(svg.contains(want), "{want:?} not in the chart");
    }
    for name in &want {
        assert!(
            svg.contains(&format!("\n{name}\n")),
            "{name} not in the chart"
        );
    }
    assert_eq!(svg.matches("bound ").count(), want.len(), "a bound per row");
}

#[test]
fn random_weights_run_at_the_tiny_shape() {
    tiny_shape("cpu");
}

#[cfg(feature = "cuda")]
#[test]
fn random_weights_run_at_the_tiny_shape_on_cuda() {
    tiny_shape("cuda");
}

#[test]
fn bad_inputs_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let good = tiny_gguf(dir.path(), "llama", GgmlDType::Q8_0);
    let arg = |p: &Path| p.to_str().unwrap().to_string();
    let run = |model: &Path, extra: &[&str], expect: &str| {
        let m = arg(model);
        let mut args = vec!["--device", "cpu", "--model", m.as_str()];
        args.extend(extra);
        refused("generate", &args, expect);
    };
    run(
        &dir.path().join("absent.gguf"),
        &[],
        "absent.gguf: no such file",
    );
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "not a model\n").unwrap();
    run(&text, &[], "is not a GGUF file");
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    run(&cut, &[], "it is truncated");
    let header = dir.path().join("header.gguf");
    std::fs::write(&header, &bytes[..100]).unwrap();
    run(&header, &[], "it is truncated");
    run(
        &tiny_gguf(dir.path(), "qwen2", GgmlDType::Q8_0),
        &[],
        "is a 'qwen2' model",
    );
    // An IQ2_XXS tensor (ggml type 16): the type id of blk.0.attn_q patched.
    let mut patched = bytes.clone();
    let name = b"blk.0.attn_q.weight";
    let at = patched.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    let dtype_at = at + 4 + 2 * 8;
    assert_eq!(
        patched[dtype_at..dtype_at + 4],
        8u32.to_le_bytes(),
        "Q8_0 there"
    );
    patched[dtype_at..dtype_at + 4].copy_from_slice(&16u32.to_le_bytes());
    let iq = dir.path().join("iq.gguf");
    std::fs::write(&iq, patched).unwrap();
    run(&iq, &[], "ggml type 16, which this program does not read");
    let long = "many words ".repeat(8);
    run(
        &good,
        &["--prompt", &long],
        "longer than the model's context of 64",
    );
    run(&good, &["--tokens", "0"], "0 is not in 1..=65536");
    run(&good, &["--dtypes", "q4_k"], "are not a multiple of that");
    run(&good, &["--dtypes", "tf32"], "needs a CUDA device");
    refused(
        "generate",
        &["--shape", "llama-9"],
        "--shape llama-9: expected one of",
    );
}

#[test]
fn without_the_model_it_says_how_to_get_it() {
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::bin("generate"))
        .args(["--device", "cpu"])
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("`just model` fetches it"), "{stderr}");
}
