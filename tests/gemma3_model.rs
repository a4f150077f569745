//! The SentencePiece-style tokenizer on the real Gemma 3 270M file
//! (`scripts/model.sh gemma3`) against llama.cpp, the file's own runtime:
//! the ids of three prompts checked by hand and of the fixture
//! tests/fixtures/gemma3-tokens.json (llama-cpp-python's ids for 25 texts:
//! unicode, digits, runs of spaces, newlines, tabs, emoji, special tokens in
//! the text, a character only byte tokens cover), each decoded back; BOS
//! added as the file says, the end-of-turn token ending an answer, and
//! Gemma's turn format used for a file without a chat template.
//! Without the file these skip with a line saying so, unless CI is set: CI
//! fetches it, and there a missing file fails.

use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_lab::model::candle::CandleLm;
use candle_lab::model::decoder::Decoder;
use candle_lab::model::gguf::ModelFile;
use candle_lab::model::layer::Kernels;
use candle_lab::model::quantize::{row_types, Quant};
use candle_lab::model::text::{TemplateUsed, Text};
use candle_lab::model::weights::{Source, Weights};
use candle_lab::model::{answer, pick, Activation, Arch, Lm};

mod common;

/// The file `just model gemma3` fetches, checked as `generate` checks it.
fn file() -> Option<ModelFile> {
    common::cached_model("gemma3")
}

/// The file's tokenizer.
fn text() -> Option<Text> {
    let f = file()?;
    let t0 = Instant::now();
    let text = Text::from_model(&f).unwrap();
    eprintln!(
        "the tokenizer of {} tokens built in {:.0} ms",
        f.config.vocab,
        t0.elapsed().as_secs_f64() * 1e3
    );
    Some(text)
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn three_prompts_tokenize_as_llama_cpp_tokenizes_them() {
    let Some(text) = text() else { return };
    assert_eq!(
        (text.bos, text.add_bos, text.add_eos),
        (Some(2), true, false)
    );
    for (s, want) in [
        (
            "The capital of France is",
            &[2, 818, 5279, 529, 7001, 563][..],
        ),
        (
            "What is a tensor? Answer in one sentence.",
            &[
                2, 3689, 563, 496, 18441, 236881, 25685, 528, 886, 13315, 236761,
            ],
        ),
        (
            "<start_of_turn>user\nHi<end_of_turn>",
            &[2, 105, 2364, 107, 10979, 106],
        ),
    ] {
        let got = text.encode(s).unwrap();
        assert_eq!(got, want, "{s:?}");
        assert_eq!(text.decode(&got[1..]).unwrap(), s);
    }
}

#[test]
fn the_fixtures_texts_tokenize_as_llama_cpp_and_decode_back() {
    let Some(text) = text() else { return };
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_file("tests/fixtures/gemma3-tokens.json")).unwrap(),
    )
    .unwrap();
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for c in cases {
        let s = c["text"].as_str().unwrap();
        let mut want = ids(&c["ids"]);
        // llama.cpp adds BOS before a text that starts with it; Text does not.
        if want.starts_with(&[2, 2]) {
            want.remove(0);
        }
        let got = text.encode(s).unwrap();
        assert_eq!(got, want, "{s:?}");
        let shown = if s.starts_with("<bos>") {
            text.decode(&got).unwrap()
        } else {
            text.decode(&got[1..]).unwrap()
        };
        assert_eq!(shown, s, "{s:?} decoded back");
    }
}

#[test]
fn an_answer_ends_at_eos_or_end_of_turn_and_gemmas_turns_format_the_prompt() {
    let Some(text) = text() else { return };
    // <eos> (the file's EOS), <end_of_turn> (found by its text, as llama.cpp).
    assert_eq!(text.eos, [1, 106]);
    assert_eq!(text.template_used(), TemplateUsed::None);
    assert_eq!(text.chat("Hi").unwrap(), "Hi");
    let (name, turns) = Arch::Gemma3.fallback_template().unwrap();
    let text = text.with_fallback_template(name, turns);
    let name = name.to_string();
    assert_eq!(text.template_used(), TemplateUsed::Fallback(name));
    let formatted = text.chat("Hi").unwrap();
    assert_eq!(
        formatted,
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
    );
    // One BOS, from add_bos_token; the turn markers whole.
    assert_eq!(
        text.encode(&formatted).unwrap(),
        [2, 105, 2364, 107, 10979, 106, 107, 105, 4368, 107]
    );
    assert!(text
        .template_used()
        .to_string()
        .contains("Gemma's turn format"));
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let d = (a - b).unwrap().abs().unwrap().flatten_all().unwrap();
    d.max(0).unwrap().to_scalar::<f32>().unwrap()
}

/// The suite's two paths on the real file against candle-transformers'
/// `quantized_gemma3` on the same blocks, the prompt's logits, to 5% of
/// their scale, and the same next token. The float path (the blocks
/// dequantized, f32 activations) differs from candle by what quantizing the
/// activations to Q8 moves (measured: 0.89 of 29); the lab's quantized path
/// quantizes them as candle does, but each projection's input is rounded
/// again, a value at a rounding boundary goes one way in one path and the
/// other way in the other, and over 18 layers their roundings part as far
/// (measured: 0.97 of 29; on tiny models, where they do not, the two agree
/// to 0.2%: src/model/tests.rs). Each with the MLP gated as candle gates it
/// (SiLU, candle's issue 3745); gated as Gemma 3 is (GELU), the two paths
/// agree with each other and not with candle.
#[test]
fn the_suites_paths_give_candles_logits_on_the_file() {
    let Some(f) = file() else { return };
    assert_eq!(f.config.arch, Arch::Gemma3);
    let source = Source::File(Box::new(f));
    let w = Weights::uncached(&source);
    let cpu = Device::Cpu;
    let prompt = [2u32, 818, 5279, 529, 7001, 563];
    let types = row_types(&source, Quant::Stored).unwrap();
    let lab = Decoder::load_quantized(&w, &types, &cpu, 8).unwrap();
    let float = Decoder::load(&w, DType::F32, &cpu, 8, Kernels::Fused).unwrap();
    let mut candle = CandleLm::load(&w, Quant::Stored, &cpu).unwrap();
    let c = candle.forward(&prompt, 0).unwrap();
    let scale = c.abs().unwrap().flatten_all().unwrap().max(0).unwrap();
    let scale = scale.to_scalar::<f32>().unwrap();
    let mut lab = lab.with_activation(Activation::Silu);
    let mut float = float.with_activation(Activation::Silu);
    let (l, x) = (
        lab.forward(&prompt, 0).unwrap(),
        float.forward(&prompt, 0).unwrap(),
    );
    let (dl, dx) = (max_diff(&l, &c), max_diff(&x, &c));
    eprintln!("logits' scale {scale}: lab {dl}, float {dx} from candle's");
    assert!(dl < 5e-2 * scale, "lab: {dl} of {scale}");
    assert!(dx < 5e-2 * scale, "float: {dx} of {scale}");
    assert_eq!(pick(&l).unwrap(), pick(&c).unwrap());
    assert_eq!(pick(&x).unwrap(), pick(&c).unwrap());
    let mut lab = lab.with_activation(Activation::GeluTanh);
    let mut float = float.with_activation(Activation::GeluTanh);
    let (l, x) = (
        lab.forward(&prompt, 0).unwrap(),
        float.forward(&prompt, 0).unwrap(),
    );
    assert!(max_diff(&l, &x) < 5e-2 * scale, "{}", max_diff(&l, &x));
    assert!(max_diff(&l, &c) > 5e-2 * scale, "GELU is not SiLU");
}

/// The suite's two paths on the real file against llama.cpp, the file's
/// home runtime (tests/fixtures/gemma3-greedy.json: its greedy answers, made
/// by llama-cpp-python): from the same prompt ids, the first tokens of each
/// greedy answer are llama.cpp's. Both compute Gemma 3 (GELU-gated, its
/// norms, its windows); where a next token's two best logits are close,
/// rounding decides it, and answers part there: the lab's path (Q8
/// activations, as llama.cpp's CPU kernels quantize them, in another order)
/// follows llama.cpp for 4 tokens of the first prompt and 16 of the second,
/// the float path (f32 activations) for 15 and 10 (measured). Held here: the
/// first 4 of 8, for both prompts (a debug build's time for two decoders).
/// The fixture's third prompt, 969 tokens, longer than Gemma's window of 512,
/// gives llama.cpp's 16 tokens on both paths in a release build (the
/// sliding-window layers as llama.cpp masks them; docs/generate.md): too
/// slow for the debug build here.
#[test]
fn the_suites_greedy_answers_start_as_llama_cpps() {
    let Some(f) = file() else { return };
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_file("tests/fixtures/gemma3-greedy.json")).unwrap(),
    )
    .unwrap();
    let source = Source::File(Box::new(f));
    let w = Weights::uncached(&source);
    let types = row_types(&source, Quant::Stored).unwrap();
    let cpu = Device::Cpu;
    let mut lab = Decoder::load_quantized(&w, &types, &cpu, 32).unwrap();
    let mut float = Decoder::load(&w, DType::F32, &cpu, 32, Kernels::Lab).unwrap();
    for c in &fixture["cases"].as_array().unwrap()[..2] {
        let prompt = ids(&c["prompt_ids"]);
        let want = ids(&c["greedy"]);
        for (name, lm) in [("lab", &mut lab), ("float", &mut float)] {
            let (got, _) = answer(lm, &prompt, 8, &[]).unwrap();
            let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
            eprintln!(
                "{name}: {same} of 8 tokens llama.cpp's ({} prompt tokens)",
                prompt.len()
            );
            assert!(same >= 4, "{name}: {got:?} against llama.cpp's {want:?}");
        }
    }
}
