//! Candle on the real model file (SmolLM2-135M-Instruct, `just model`)
//! against transformers, through the fixture tests/fixtures/generate-reference.json
//! (transformers' token ids and fp32 greedy answer, which pytorch/generate's
//! tests hold transformers and the PyTorch twin to): the tokenizer built from
//! the GGUF gives transformers' ids for a handful of prompts, chat template
//! included, and decodes them back; Candle's fp32 greedy answer (the float
//! path) is transformers' (the fixture's 8 tokens: a prefill and seven steps
//! through the cache), with candle-nn's kernels and with the suite's; the
//! stored Q4_1 path starts the same answer (its first 2 tokens), and its two
//! runs, through quantized_llama and through the lab's quantized path, give
//! one another's first 8 tokens.
//! Without the file these skip with a line saying so, unless CI is set: CI
//! fetches it, and there a missing file fails.

use candle_core::{DType, Device};
use candle_lab::model::candle::CandleLm;
use candle_lab::model::decoder::Decoder;
use candle_lab::model::gguf::ModelFile;
use candle_lab::model::layer::Kernels;
use candle_lab::model::quantize::{row_types, Quant};
use candle_lab::model::text::Text;
use candle_lab::model::weights::{Source, Weights};
use candle_lab::model::{answer, Lm};

mod common;

fn model() -> Option<ModelFile> {
    common::cached_model("smollm2")
}

fn fixture() -> serde_json::Value {
    let text = std::fs::read_to_string(common::repo_file("tests/fixtures/generate-reference.json"))
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn the_tokenizer_gives_transformers_ids_and_decodes_them_back() {
    let Some(file) = model() else { return };
    let text = Text::from_model(&file).unwrap();
    let want = fixture();
    for c in want["chat"].as_array().unwrap() {
        let user = c["user"].as_str().unwrap();
        let formatted = text.chat(user).unwrap();
        assert_eq!(formatted, c["formatted"].as_str().unwrap(), "{user:?}");
        let got = text.encode(&formatted).unwrap();
        assert_eq!(got, ids(&c["ids"]), "{user:?}");
        assert_eq!(text.decode(&got).unwrap(), c["decoded"].as_str().unwrap());
    }
    for p in want["plain"].as_array().unwrap() {
        let s = p["text"].as_str().unwrap();
        assert_eq!(text.encode(s).unwrap(), ids(&p["ids"]), "{s:?}");
        assert_eq!(text.decode(&ids(&p["ids"])).unwrap(), s);
    }
}

#[test]
fn candles_fp32_answer_is_transformers() {
    let Some(file) = model() else { return };
    let want = fixture();
    let g = &want["greedy"];
    let n = g["tokens"].as_u64().unwrap() as usize;
    let prompt = ids(&want["chat"][0]["ids"]);
    let source = Source::File(Box::new(file));
    // With candle-nn's kernels and with the suite's own (`--kernels lab`).
    for kernels in [Kernels::Fused, Kernels::Lab] {
        let positions = prompt.len() + n;
        let mut fp32 = Decoder::load(
            &Weights::uncached(&source),
            DType::F32,
            &Device::Cpu,
            positions,
            kernels,
        )
        .unwrap();
        let (got, _) = answer(&mut fp32, &prompt, n, &[]).unwrap();
        assert_eq!(got, ids(&g["ids"]), "{kernels:?}");
    }
    // The file as stored, its Q4_1 blocks, on two paths that share their
    // arithmetic: Candle's quantized_llama and the lab's quantized path
    // (block's layers on the same blocks, the suite's quantized kernels).
    // Both meet the same 4-bit weights with the activations quantized alike
    // (Q8_1 per 32 values, its sum rounded as Candle rounds it: src/kernels/
    // quant/act.rs) and sum the blocks' integer products exactly; what
    // differs is the order of the float sums (the blocks' scaled products,
    // the norms, attention): a tiny model's logits agree to 5e-7. So their
    // first 8 tokens (a prefill and seven steps through each one's cache)
    // are one answer. Against fp32's (transformers') answer the Q4_1 paths
    // hold its first 2 tokens only: 4-bit weights and 8-bit activations move
    // the logits by far more than a summation order does, and a later token
    // whose two best logits are that close may rightly go the other way.
    let n_q = 8.min(n);
    let t = Quant::Stored;
    let mut q = CandleLm::load(&Weights::uncached(&source), t, &Device::Cpu).unwrap();
    let (got, _) = answer(&mut q as &mut dyn Lm, &prompt, n_q, &[]).unwrap();
    assert_eq!(got.len(), n_q, "candle's Q4_1 path stopped early: {got:?}");
    assert_eq!(
        got[..2],
        ids(&g["ids"])[..2],
        "candle's Q4_1 path against fp32's"
    );
    let types = row_types(&source, t).unwrap();
    let weights = Weights::uncached(&source);
    let mut lab =
        Decoder::load_quantized(&weights, &types, &Device::Cpu, prompt.len() + n_q).unwrap();
    let (lab_ids, _) = answer(&mut lab, &prompt, n_q, &[]).unwrap();
    assert_eq!(
        lab_ids, got,
        "the lab's quantized path against candle's, {n_q} tokens"
    );
}
