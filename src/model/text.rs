//! From a user's message to token ids and back, with what the GGUF file
//! itself holds: its tokenizer (tokenizer.ggml.tokens, .token_type, .merges
//! or .scores, the special tokens' ids, whether a text starts with BOS), and
//! its chat template (tokenizer.chat_template, Jinja). A "gpt2" tokenizer is
//! built as transformers builds it from a GGUF (`integrations/ggml.py`:
//! GPT-2 byte-level BPE, no prefix space, the control tokens as special added
//! tokens); a "llama" one (SentencePiece-style) tokenizes as llama.cpp does
//! ([`spm`]). The template is rendered as transformers'
//! `apply_chat_template(messages, add_generation_prompt=True)` renders it: the
//! same variables (`messages`, `add_generation_prompt`, the special tokens'
//! texts) and Jinja settings (`trim_blocks`, `lstrip_blocks`). A file without
//! a template takes the caller's fallback (Gemma's turns for Gemma 3), and the
//! result says which was used.

mod spm;

use anyhow::{Context, Result};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Merges, Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use super::gguf::vocab::{self, TokenizerModel, Vocabulary, CONTROL, USER_DEFINED};
use super::gguf::{Gguf, ModelFile};
use crate::error::contained;
pub use spm::Spm;

/// The template engine's steps for one chat: a real template takes a few
/// hundred for one message; a loop of loops runs out here, in well under a
/// second, instead of for minutes.
const TEMPLATE_FUEL: u64 = 200_000;

/// The template engine's working memory for one chat beyond its output and
/// its own text ([`render`]): a real template takes kilobytes.
const TEMPLATE_MEMORY: usize = 64 << 20;

/// The end-of-turn markers llama.cpp takes as the end-of-turn token when the
/// file names none (tokenizer.ggml.eot_token_id), in its order; the first one
/// in the vocabulary is taken.
const EOT_MARKERS: [&str; 11] = [
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

/// Which chat template formats a message.
#[derive(Clone, Debug, PartialEq)]
pub enum TemplateUsed {
    /// The file's own (tokenizer.chat_template).
    File,
    /// The caller's fallback, by the name it was given ("Gemma's turn
    /// format"): the file has none.
    Fallback(String),
    /// None: the message as written.
    None,
}

impl std::fmt::Display for TemplateUsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateUsed::File => write!(f, "the file's chat template"),
            TemplateUsed::Fallback(name) => write!(f, "{name} (the file has no chat template)"),
            TemplateUsed::None => write!(
                f,
                "none (the file has no chat template): the message as written"
            ),
        }
    }
}

/// The tokenizer itself: transformers' BPE, or llama.cpp's SPM.
enum Coder {
    Bpe(Box<Tokenizer>),
    Spm(Spm),
}

/// The file's tokenizer, its special tokens, and its chat template.
pub struct Text {
    coder: Coder,
    pub bos: Option<u32>,
    /// The ids that end an answer: the file's EOS and end-of-turn token.
    pub eos: Vec<u32>,
    /// Whether a text's ids start with BOS and end with EOS
    /// (tokenizer.ggml.add_bos_token, .add_eos_token).
    pub add_bos: bool,
    pub add_eos: bool,
    template: Option<String>,
    /// The caller's (name, template) for a file without one.
    fallback: Option<(String, String)>,
    token_text: Vec<String>,
    /// The longest text a prompt can have and still fit the context: the
    /// context's positions, each holding the longest token.
    max_prompt_bytes: usize,
}

impl Text {
    /// Builds the tokenizer from the checked metadata of `f`
    /// ([`vocab::vocabulary`]); a tokenizer other than GPT-2-style byte-level
    /// BPE ("gpt2") or SentencePiece-style ("llama") is refused there.
    pub fn from_model(f: &ModelFile) -> Result<Self> {
        Self::from_gguf(&f.gguf, f.config.vocab, f.config.context)
    }

    /// The same from a GGUF's metadata alone: `rows` the embedding's rows (the
    /// most tokens there can be), `context` the positions a prompt can fill.
    pub fn from_gguf(g: &Gguf, rows: usize, context: usize) -> Result<Self> {
        let v = vocab::vocabulary(g, rows)?;
        let token_text: Vec<String> = v.tokens.iter().map(|t| t.to_string()).collect();
        let longest = token_text.iter().map(|t| t.len()).max().unwrap_or(1);
        let coder = match v.model {
            TokenizerModel::Gpt2 => Coder::Bpe(Box::new(bpe(&v, &token_text)?)),
            TokenizerModel::Spm => Coder::Spm(Spm::new(
                &v.tokens,
                &v.types,
                &v.scores,
                v.unk,
                v.add_space_prefix,
            )),
        };
        let mut eos = Vec::new();
        // As llama.cpp: without an end-of-turn id, the token that reads as one.
        let eot = v.eot.or_else(|| {
            EOT_MARKERS
                .iter()
                .find_map(|m| token_text.iter().position(|t| t == m))
                .map(|i| i as u32)
        });
        for id in [v.eos, eot].into_iter().flatten() {
            if !eos.contains(&id) {
                eos.push(id);
            }
        }
        Ok(Self {
            coder,
            bos: v.bos,
            eos,
            add_bos: v.add_bos,
            add_eos: v.add_eos,
            template: v.template.map(str::to_string),
            fallback: None,
            max_prompt_bytes: context.saturating_mul(longest),
            token_text,
        })
    }

    /// The template `chat` uses when the file has none: `template` (Jinja,
    /// given the same variables as a file's), reported as `name`'s.
    pub fn with_fallback_template(mut self, name: &str, template: &str) -> Self {
        self.fallback = Some((name.to_string(), template.to_string()));
        self
    }

    /// Which template `chat` formats a message with.
    pub fn template_used(&self) -> TemplateUsed {
        match (&self.template, &self.fallback) {
            (Some(_), _) => TemplateUsed::File,
            (None, Some((name, _))) => TemplateUsed::Fallback(name.clone()),
            (None, None) => TemplateUsed::None,
        }
    }

    /// The ids of `text`, special tokens matched as wholes; BOS first when the
    /// file says so (tokenizer.ggml.add_bos_token) and the text does not
    /// already start with it (a template that writes `bos_token` gets one
    /// BOS, where llama.cpp would write two), EOS last when the file says so.
    /// Text longer than the context could hold is refused before it is
    /// tokenized.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        if text.len() > self.max_prompt_bytes {
            anyhow::bail!(
                "the prompt is {} bytes, more than the model's context could hold ({} bytes: \
                 its positions times its longest token)",
                text.len(),
                self.max_prompt_bytes
            );
        }
        let mut ids = contained("tokenizing the prompt", || match &self.coder {
            Coder::Bpe(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt ({e})")),
            Coder::Spm(s) => s.encode(text),
        })?;
        if let Some(bos) = self.bos.filter(|_| self.add_bos) {
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        if let Some(eos) = self.eos.first().filter(|_| self.add_eos) {
            ids.push(*eos);
        }
        Ok(ids)
    }

    /// `ids` back to text, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match &self.coder {
            Coder::Bpe(t) => t
                .decode(ids, false)
                .map_err(|e| anyhow::anyhow!("cannot decode token ids ({e})")),
            Coder::Spm(s) => s.decode(ids),
        }
    }

    fn text_of(&self, id: Option<u32>) -> String {
        id.and_then(|i| self.token_text.get(i as usize).cloned())
            .unwrap_or_default()
    }

    /// `user` as a one-message chat formatted by the file's template with the
    /// generation prompt, else by the caller's fallback; without either, the
    /// message itself ([`Text::template_used`] says which).
    pub fn chat(&self, user: &str) -> Result<String> {
        let template = match (&self.template, &self.fallback) {
            (Some(t), _) | (None, Some((_, t))) => t,
            (None, None) => return Ok(user.to_string()),
        };
        render(
            template,
            user,
            &self.text_of(self.bos),
            &self.text_of(self.eos.first().copied()),
            self.max_prompt_bytes,
        )
    }
}

/// A "gpt2" vocabulary as transformers builds it: byte-level BPE from the
/// tokens and merges, the control and user-defined tokens special.
fn bpe(v: &Vocabulary, tokens: &[String]) -> Result<Tokenizer> {
    let merges: Merges = v
        .merges
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    contained("building the tokenizer", || {
        let mut bpe = BPE::builder().vocab_and_merges(vocab, merges);
        if let Some(unk) = v.unk {
            bpe = bpe.unk_token(tokens[unk as usize].clone());
        }
        let bpe = bpe
            .build()
            .map_err(|e| anyhow::anyhow!("its vocabulary and merges do not make a BPE ({e})"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        // llama.cpp's regexes for the file's pre-tokenizer, each splitting
        // the pieces the one before left (matches and the text between
        // them), then the pieces' bytes as GPT-2's characters.
        let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
        for r in splits(v.pre)? {
            let pattern = SplitPattern::Regex((*r).to_string());
            let split = Split::new(pattern, SplitDelimiterBehavior::Isolated, false)
                .map_err(|e| anyhow::anyhow!("the pre-tokenizer's regex does not build ({e})"))?;
            steps.push(split.into());
        }
        steps.push(ByteLevel::new(v.add_space_prefix, false, false).into());
        tokenizer.with_pre_tokenizer(Some(Sequence::new(steps)));
        tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&v.types)
            .filter(|(_, t)| matches!(**t, CONTROL | USER_DEFINED))
            .map(|(s, _)| AddedToken::from(s.clone(), true))
            .collect();
        tokenizer
            .add_special_tokens(special)
            .map_err(|e| anyhow::anyhow!("its special tokens cannot be added ({e})"))?;
        Ok(tokenizer)
    })
}

/// GPT-2's pre-tokenizer regex (llama.cpp's `LLAMA_VOCAB_PRE_TYPE_GPT2`).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's (`LLAMA3`): digits in threes, letters after one other character.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2's (`QWEN2`, Qwen 2.5's and 3's files too): each digit alone.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The regexes llama.cpp splits a GPT-2-style BPE's text with, in turn, for
/// the file's `tokenizer.ggml.pre` (llama.cpp's `llm_tokenizer_bpe`, by the
/// names its `llama_vocab::load` maps): SmolLM2's "smollm" splits digits
/// alone first, Llama 3's "llama-bpe" keeps them in threes, Qwen's "qwen2"
/// alone; GPT-2's where the file names none. A name it does not know is
/// refused: another split would tokenize the prompt into other ids.
fn splits(pre: Option<&str>) -> Result<&'static [&'static str]> {
    Ok(match pre.unwrap_or("gpt2") {
        "gpt2" | "mpt" | "olmo" | "jais" => &[GPT2],
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" => {
            &[r"\p{N}", GPT2]
        }
        "llama3" | "llama-v3" | "llama-bpe" | "dbrx" | "smaug-bpe" => &[LLAMA3],
        "qwen2" | "stablelm2" => &[QWEN2],
        other => anyhow::bail!(
            "tokenizer.ggml.pre is '{other}', a pre-tokenizer the suite does not know (it \
             splits as gpt2, smollm, llama-bpe and qwen2 do, after llama.cpp)"
        ),
    })
}

/// Writes at most `left` bytes, then fails: a template's output is cut off
/// as soon as it is longer than any prompt the model could take.
struct Capped {
    out: Vec<u8>,
    left: usize,
    hit: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.left {
            self.hit = true;
            return Err(std::io::Error::other("the output limit"));
        }
        self.left -= buf.len();
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Renders a chat template as transformers does (`utils/chat_template_utils.py`:
/// a sandboxed Jinja environment with `trim_blocks` and `lstrip_blocks`, the
/// `loopcontrols` extension, `raise_exception` and `tojson`), under limits:
/// [`TEMPLATE_FUEL`] steps, at most `max_bytes` of output, and at most
/// [`TEMPLATE_MEMORY`] of working memory beyond its output and its own text
/// ([`template_memory`]). minijinja counts steps, not bytes, and bounds only
/// one repeated string (`'x' * n`, 100 MB): `s ~ s` and `s + s` build any
/// size, so a template that doubles a string 28 times took 811 MB. The bytes
/// are held by the counting allocator ([`crate::memory::within`]); without
/// it (the library's unit tests) only the steps and the output are.
pub fn render(
    template: &str,
    user: &str,
    bos: &str,
    eos: &str,
    max_bytes: usize,
) -> Result<String> {
    let limit = template_memory(template, user, max_bytes);
    let owned = [template, user, bos, eos].map(str::to_string);
    contained("rendering the chat template", || {
        crate::memory::within(limit, move || {
            let [template, user, bos, eos] = owned;
            render_limited(&template, &user, &bos, &eos, max_bytes)
        })
        .unwrap_or_else(|| {
            anyhow::bail!(
                "its chat template needs more than {} of memory for one message (it builds \
                 strings past that: a string doubled again and again?)",
                crate::units::size(limit as u64)
            )
        })
    })
}

/// The working memory a template may take for one message: [`TEMPLATE_MEMORY`],
/// twice the output it may write (a growing buffer), and 16 bytes for each of
/// its own and the message's (the compiled template, the context).
fn template_memory(template: &str, user: &str, max_bytes: usize) -> usize {
    let text = template.len().saturating_add(user.len());
    TEMPLATE_MEMORY
        .saturating_add(max_bytes.saturating_mul(2))
        .saturating_add(text.saturating_mul(16))
}

fn render_limited(
    template: &str,
    user: &str,
    bos: &str,
    eos: &str,
    max_bytes: usize,
) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                msg,
            ))
        },
    );
    env.add_template("chat", template)
        .map_err(|e| anyhow::anyhow!("its chat template does not parse ({e})"))?;
    let t = env.get_template("chat").context("the chat template")?;
    let ctx = minijinja::context! {
        messages => vec![minijinja::context! { role => "user", content => user }],
        add_generation_prompt => true,
        bos_token => bos,
        eos_token => eos,
    };
    let mut out = Capped {
        out: Vec::new(),
        left: max_bytes,
        hit: false,
    };
    let rendered = t.render_captured_to(ctx, &mut out).map(drop);
    match rendered {
        Ok(()) => {
            String::from_utf8(out.out).context("its chat template writes bytes that are not UTF-8")
        }
        Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => anyhow::bail!(
            "its chat template runs past {TEMPLATE_FUEL} steps on one message (a loop that \
             does not end?)"
        ),
        Err(_) if out.hit => anyhow::bail!(
            "its chat template writes more than {max_bytes} bytes for one message, more than \
             the model's context could hold"
        ),
        Err(e) => anyhow::bail!("its chat template fails on the prompt ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::gguf_file::Value;

    /// SmolLM2-Instruct's template, as its GGUF's tokenizer.chat_template holds it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn the_chat_template_renders_as_transformers_renders_it() {
        // transformers 5.17: apply_chat_template([{"role": "user", "content":
        // "What is the capital of France?"}], tokenize=False, add_generation_prompt=True)
        let got = render(
            SMOLLM2,
            "What is the capital of France?",
            "<|im_start|>",
            "<|im_end|>",
            1 << 20,
        )
        .unwrap();
        assert_eq!(
            got,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
             Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n\
             <|im_start|>assistant\n"
        );
        // trim_blocks and lstrip_blocks: a block tag's own line leaves no blank.
        let t = "{% for m in messages %}\n  {{ m.content }}\n{% endfor %}";
        assert_eq!(render(t, "hi", "", "", 1 << 20).unwrap(), "  hi\n");
        let e = render(
            "{{ raise_exception('no system role') }}",
            "x",
            "",
            "",
            1 << 20,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no system role"), "{e}");
        assert!(render("{% if %}", "x", "", "", 1 << 20)
            .unwrap_err()
            .to_string()
            .starts_with("its chat template does not parse"));
        // Python's string methods, as Llama 3's templates call them.
        assert_eq!(
            render("{{ messages[0].content.strip() }}", " a ", "", "", 1 << 20).unwrap(),
            "a"
        );
    }

    #[test]
    fn a_template_runs_under_limits_of_steps_and_of_output() {
        let loops =
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let e = render(loops, "x", "", "", 1 << 20).unwrap_err().to_string();
        assert!(e.contains("runs past 200000 steps"), "{e}");
        let e = render("{{ 'ab ' * 300000 }}", "x", "", "", 1000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("writes more than 1000 bytes"), "{e}");
        // minijinja's own limit on one repeated string (100 MB).
        let e = render("{{ 'ab ' * 90000000 }}", "x", "", "", 1000)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("its chat template fails on the prompt"),
            "{e}"
        );
        assert_eq!(render("{{ 'ab' * 3 }}", "x", "", "", 6).unwrap(), "ababab");
    }

    /// A tiny SPM vocabulary's GGUF metadata (no tensors: the tokenizer reads
    /// none), with `extra` keys added or replacing.
    fn spm_gguf(extra: Vec<(&str, Value)>) -> Gguf {
        let tokens = [
            "<pad>",
            "<eos>",
            "<bos>",
            "<unk>",
            "<end_of_turn>",
            "h",
            "i",
            "hi",
            "▁",
        ];
        let types = [3, 3, 3, 2, 3, 1, 1, 1, 1];
        let mut metadata: Vec<(String, Value)> = vec![
            ("tokenizer.ggml.model".into(), Value::String("llama".into())),
            (
                "tokenizer.ggml.tokens".into(),
                Value::Array(
                    tokens
                        .iter()
                        .map(|t| Value::String(t.to_string()))
                        .collect(),
                ),
            ),
            (
                "tokenizer.ggml.scores".into(),
                Value::Array((0..9).map(|i| Value::F32(-(i as f32))).collect()),
            ),
            (
                "tokenizer.ggml.token_type".into(),
                Value::Array(types.iter().map(|t| Value::I32(*t)).collect()),
            ),
            ("tokenizer.ggml.bos_token_id".into(), Value::U32(2)),
            ("tokenizer.ggml.eos_token_id".into(), Value::U32(1)),
            ("tokenizer.ggml.add_space_prefix".into(), Value::Bool(false)),
        ];
        for (k, v) in extra {
            metadata.retain(|(key, _)| key != k);
            metadata.push((k.to_string(), v));
        }
        Gguf {
            version: 3,
            metadata,
            tensors: Vec::new(),
            data_offset: 0,
        }
    }

    #[test]
    fn bos_comes_once_as_the_file_says_and_end_of_turn_ends_an_answer() {
        let text = Text::from_gguf(&spm_gguf(vec![]), 9, 64).unwrap();
        // add_bos_token absent: true for "llama", as llama.cpp.
        assert_eq!(text.encode("hi").unwrap(), [2, 7]);
        // A text that starts with BOS keeps one.
        assert_eq!(text.encode("<bos>hi").unwrap(), [2, 7]);
        assert_eq!(text.encode("hi<bos>").unwrap(), [2, 7, 2]);
        assert_eq!(text.decode(&[2, 7, 8, 5]).unwrap(), "<bos>hi h");
        // No eot_token_id: <end_of_turn> by its text.
        assert_eq!(text.eos, [1, 4]);
        let g = spm_gguf(vec![
            ("tokenizer.ggml.add_bos_token", Value::Bool(false)),
            ("tokenizer.ggml.add_eos_token", Value::Bool(true)),
            ("tokenizer.ggml.eot_token_id", Value::U32(3)),
        ]);
        let text = Text::from_gguf(&g, 9, 64).unwrap();
        assert_eq!(text.encode("hi").unwrap(), [7, 1]);
        assert_eq!(text.eos, [1, 3]);
        let e = Text::from_gguf(
            &spm_gguf(vec![("tokenizer.ggml.add_eos_token", Value::U8(1))]),
            9,
            64,
        )
        .err()
        .unwrap()
        .to_string();
        assert_eq!(e, "tokenizer.ggml.add_eos_token is a u8, not a bool");
    }

    #[test]
    fn a_file_without_a_template_takes_the_fallback_and_says_so() {
        let text = Text::from_gguf(&spm_gguf(vec![]), 9, 64).unwrap();
        assert_eq!(text.template_used(), TemplateUsed::None);
        assert_eq!(text.chat("hi").unwrap(), "hi");
        let (name, turns) = crate::model::Arch::Gemma3.fallback_template().unwrap();
        let text = text.with_fallback_template(name, turns);
        let name = name.to_string();
        assert_eq!(text.template_used(), TemplateUsed::Fallback(name));
        assert_eq!(
            text.chat("hi").unwrap(),
            "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
        );
        assert_eq!(
            text.template_used().to_string(),
            "Gemma's turn format (the file has no chat template)"
        );
        // The file's own template wins over a fallback.
        let g = spm_gguf(vec![(
            "tokenizer.chat_template",
            Value::String("[{{ messages[0].content }}]".into()),
        )]);
        let text = Text::from_gguf(&g, 9, 64)
            .unwrap()
            .with_fallback_template("Gemma's turn format", "{{ x }}");
        assert_eq!(text.template_used(), TemplateUsed::File);
        assert_eq!(text.chat("hi").unwrap(), "[hi]");
    }

    #[test]
    fn a_malformed_spm_vocabulary_is_refused_in_one_line() {
        let refused = |extra: Vec<(&str, Value)>| -> String {
            let e = Text::from_gguf(&spm_gguf(extra), 9, 64).err().unwrap();
            let line = format!("{e:#}");
            assert!(!line.contains('\n'), "{line}");
            line
        };
        let f32s = |n: usize, x: f32| Value::Array(vec![Value::F32(x); n]);
        for (extra, want) in [
            (
                vec![("tokenizer.ggml.scores", f32s(8, 0.0))],
                "tokenizer.ggml.scores is an array of 8 values, not one f32 per token (9)",
            ),
            (
                vec![(
                    "tokenizer.ggml.scores",
                    Value::Array(vec![Value::I32(0); 9]),
                )],
                "tokenizer.ggml.scores holds an i32, not f32s",
            ),
            (
                vec![("tokenizer.ggml.scores", f32s(9, f32::NAN))],
                "tokenizer.ggml.scores holds NaN for token 0; a score must be finite",
            ),
            (
                vec![("tokenizer.ggml.scores", Value::F32(0.0))],
                "tokenizer.ggml.scores is an f32 of 1 values, not one f32 per token (9)",
            ),
            (
                vec![(
                    "tokenizer.ggml.token_type",
                    Value::Array(vec![Value::I32(7); 9]),
                )],
                "tokenizer.ggml.token_type holds 7 for token 0; GGUF's token types are 0 to 6",
            ),
            (
                vec![(
                    "tokenizer.ggml.token_type",
                    Value::Array(vec![Value::I32(6); 9]),
                )],
                "token 0 is a byte token (tokenizer.ggml.token_type 6), but it reads \"<pad>\", \
                 not <0xXX>",
            ),
            (
                vec![("tokenizer.ggml.model", Value::String("bert".into()))],
                "its tokenizer is 'bert' (tokenizer.ggml.model)",
            ),
        ] {
            let line = refused(extra);
            assert!(line.starts_with(want), "{line}");
        }
        let mut g = spm_gguf(vec![]);
        g.metadata.retain(|(k, _)| k != "tokenizer.ggml.scores");
        let e = Text::from_gguf(&g, 9, 64).err().unwrap().to_string();
        assert!(e.contains("has no tokenizer.ggml.scores"), "{e}");
        // add_bos_token is true for "llama" unless it says otherwise, and a
        // one-token vocabulary has no BOS (no id, nor llama.cpp's default 1).
        let mut one = spm_gguf(vec![
            (
                "tokenizer.ggml.tokens",
                Value::Array(vec![Value::String("a".into())]),
            ),
            ("tokenizer.ggml.scores", f32s(1, 0.0)),
            (
                "tokenizer.ggml.token_type",
                Value::Array(vec![Value::I32(1)]),
            ),
        ]);
        one.metadata.retain(|(k, _)| !k.ends_with("_token_id"));
        let e = Text::from_gguf(&one, 9, 64).err().unwrap().to_string();
        assert_eq!(
            e,
            "tokenizer.ggml.add_bos_token is true, but it has no tokenizer.ggml.bos_token_id"
        );
    }

    /// The pre-tokenizers llama.cpp picks by `tokenizer.ggml.pre` split
    /// digits as theirs do: SmolLM2's one at a time, Llama 3's in threes,
    /// Qwen's one at a time with a letter run taking one character before
    /// it; a name the suite does not know is refused.
    #[test]
    fn each_pre_tokenizer_splits_as_llama_cpps() {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let pieces = |pre: &str, text: &str| -> Vec<String> {
            let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
            for r in splits(Some(pre)).unwrap() {
                let p = SplitPattern::Regex((*r).to_string());
                steps.push(
                    Split::new(p, SplitDelimiterBehavior::Isolated, false)
                        .unwrap()
                        .into(),
                );
            }
            let mut s = PreTokenizedString::from(text);
            Sequence::new(steps).pre_tokenize(&mut s).unwrap();
            s.get_splits(OffsetReferential::Original, OffsetType::Byte)
                .into_iter()
                .map(|(p, _, _)| p.to_string())
                .collect()
        };
        assert_eq!(pieces("gpt2", "in 2024 I'm"), ["in", " 2024", " I", "'m"]);
        assert_eq!(pieces("smollm", "in 2024"), ["in", " ", "2", "0", "2", "4"]);
        assert_eq!(pieces("llama-bpe", "in 20245"), ["in", " ", "202", "45"]);
        assert_eq!(pieces("qwen2", "x:abc 12"), ["x", ":abc", " ", "1", "2"]);
        let e = splits(Some("tekken")).unwrap_err().to_string();
        assert!(e.starts_with("tokenizer.ggml.pre is 'tekken'"), "{e}");
    }
}
