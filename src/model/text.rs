//! From a user's message to token ids and back, with what the GGUF file
//! itself holds: its tokenizer (tokenizer.ggml.tokens, .merges, .token_type,
//! the special tokens' ids), built as transformers builds it from a GGUF
//! (`integrations/ggml.py`: GPT-2 byte-level BPE, no prefix space, the control
//! tokens as special added tokens), and its chat template
//! (tokenizer.chat_template, Jinja), rendered as transformers'
//! `apply_chat_template(messages, add_generation_prompt=True)` renders it: the
//! same variables (`messages`, `add_generation_prompt`, the special tokens'
//! texts) and Jinja settings (`trim_blocks`, `lstrip_blocks`).

use anyhow::{Context, Result};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Merges, Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use super::gguf::check::{self, CONTROL, USER_DEFINED};
use super::gguf::ModelFile;
use crate::error::contained;

/// The template engine's steps for one chat: a real template takes a few
/// hundred for one message; a loop of loops runs out here, in well under a
/// second, instead of for minutes.
const TEMPLATE_FUEL: u64 = 200_000;

/// The file's tokenizer, its special tokens, and its chat template.
pub struct Text {
    pub tokenizer: Tokenizer,
    pub bos: Option<u32>,
    pub eos: Vec<u32>,
    template: Option<String>,
    token_text: Vec<String>,
    /// The longest text a prompt can have and still fit the context: the
    /// context's positions, each holding the longest token.
    max_prompt_bytes: usize,
}

impl Text {
    /// Builds the tokenizer from the checked metadata of `f`
    /// ([`check::vocabulary`]); a tokenizer other than GPT-2-style byte-level
    /// BPE (`tokenizer.ggml.model` "gpt2") is refused there.
    pub fn from_model(f: &ModelFile) -> Result<Self> {
        let v = check::vocabulary(&f.gguf, f.config.vocab)?;
        let tokens: Vec<String> = v.tokens.iter().map(|t| t.to_string()).collect();
        let longest = tokens.iter().map(|t| t.len()).max().unwrap_or(1);
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
        let tokenizer = contained("building the tokenizer", || {
            let mut bpe = BPE::builder().vocab_and_merges(vocab, merges);
            if let Some(unk) = v.unk {
                bpe = bpe.unk_token(tokens[unk as usize].clone());
            }
            let bpe = bpe.build().map_err(|e| {
                anyhow::anyhow!("its vocabulary and merges do not make a BPE ({e})")
            })?;
            let mut tokenizer = Tokenizer::new(bpe);
            tokenizer.with_pre_tokenizer(Some(ByteLevel::new(v.add_space_prefix, false, true)));
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
        })?;
        let mut eos = Vec::new();
        eos.extend(v.eos);
        eos.extend(v.eot.filter(|t| !eos.contains(t)));
        Ok(Self {
            tokenizer,
            bos: v.bos,
            eos,
            template: v.template.map(str::to_string),
            max_prompt_bytes: f.config.context.saturating_mul(longest),
            token_text: tokens,
        })
    }

    /// The ids of `text`, special tokens matched as wholes, nothing added
    /// around them (transformers' `tokenizer(text)` for a GGUF with
    /// `add_bos_token` false; the chat template writes its own markers).
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
        let enc = contained("tokenizing the prompt", || {
            self.tokenizer
                .encode(text, false)
                .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt ({e})"))
        })?;
        Ok(enc.get_ids().to_vec())
    }

    /// `ids` back to text, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer
            .decode(ids, false)
            .map_err(|e| anyhow::anyhow!("cannot decode token ids ({e})"))
    }

    fn text_of(&self, id: Option<u32>) -> String {
        id.and_then(|i| self.token_text.get(i as usize).cloned())
            .unwrap_or_default()
    }

    /// `user` as a one-message chat formatted by the file's template with the
    /// generation prompt; without a template, the message itself.
    pub fn chat(&self, user: &str) -> Result<String> {
        let Some(template) = &self.template else {
            return Ok(user.to_string());
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
/// [`TEMPLATE_FUEL`] steps, and at most `max_bytes` of output.
pub fn render(
    template: &str,
    user: &str,
    bos: &str,
    eos: &str,
    max_bytes: usize,
) -> Result<String> {
    contained("rendering the chat template", || {
        render_limited(template, user, bos, eos, max_bytes)
    })
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
}
