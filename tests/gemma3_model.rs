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

use std::path::PathBuf;
use std::time::Instant;

use candle_lab::model::gguf::{open_regular, read};
use candle_lab::model::text::{TemplateUsed, Text};
use candle_lab::model::Arch;

mod common;

const FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// Where `scripts/model.sh gemma3` puts the file.
fn path() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
    cache.join("candle-lab/models").join(FILE)
}

/// The file's tokenizer (Gemma 3 is not a Llama: its metadata is read, not
/// checked as a model `generate` runs).
fn text() -> Option<Text> {
    let path = path();
    if !path.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no model at {}: CI fetches it with `scripts/model.sh gemma3`",
            path.display()
        );
        eprintln!(
            "skipped: no model at {} (`scripts/model.sh gemma3` fetches it)",
            path.display()
        );
        return None;
    }
    let (mut file, bytes) = open_regular(&path).unwrap();
    let g = read::read(&mut std::io::BufReader::new(&mut file), bytes).unwrap();
    let rows = g.tensor("token_embd.weight").unwrap().dims[0];
    let t0 = Instant::now();
    let text = Text::from_gguf(&g, rows, 32_768).unwrap();
    eprintln!(
        "the tokenizer of {rows} tokens built in {:.0} ms",
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
