//! From a user's message to token ids and back, with what the GGUF file
//! itself holds: its tokenizer (tokenizer.ggml.tokens, .merges, .token_type,
//! the special tokens' ids), built as transformers builds it from a GGUF
//! (`integrations/ggml.py`: GPT-2 byte-level BPE, no prefix space, the control
//! tokens as special added tokens), and its chat template
//! (tokenizer.chat_template, Jinja), rendered as transformers'
//! `apply_chat_template(messages, add_generation_prompt=True)` renders it: the
//! same variables (`messages`, `add_generation_prompt`, the special tokens'
//! texts) and Jinja settings (`trim_blocks`, `lstrip_blocks`).

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Merges, Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use super::gguf::string;

/// GGUF's token types (llama.cpp's `llama_token_type`): 3 is a control token
/// (`<|im_start|>`), 4 a user-defined one; both match as whole special tokens.
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// The file's tokenizer, its special tokens, and its chat template.
pub struct Text {
    pub tokenizer: Tokenizer,
    pub bos: Option<u32>,
    pub eos: Vec<u32>,
    template: Option<String>,
    token_text: Vec<String>,
}

fn strings(c: &Content, key: &str) -> Result<Vec<String>> {
    match c.metadata.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| Ok(v.to_string().context("not a string")?.clone()))
            .collect::<Result<Vec<_>>>()
            .with_context(|| key.to_string()),
        _ => bail!("its metadata has no {key} (a tokenizer is needed for text)"),
    }
}

fn id(c: &Content, key: &str) -> Option<u32> {
    c.metadata.get(key)?.to_u64().ok().map(|v| v as u32)
}

impl Text {
    /// Builds the tokenizer from `c`'s metadata; a tokenizer other than
    /// GPT-2-style byte-level BPE (`tokenizer.ggml.model` "gpt2") is refused.
    pub fn from_gguf(c: &Content) -> Result<Self> {
        let model = string(c, "tokenizer.ggml.model").unwrap_or("(none)");
        if model != "gpt2" {
            bail!(
                "its tokenizer is '{model}' (tokenizer.ggml.model); generate builds GPT-2-style \
                 byte-level BPE tokenizers ('gpt2': SmolLM, Llama 3) from a GGUF"
            );
        }
        let tokens = strings(c, "tokenizer.ggml.tokens")?;
        let merges: Merges = strings(c, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| match m.split_once(' ') {
                Some((a, b)) => Ok((a.to_string(), b.to_string())),
                None => bail!("tokenizer.ggml.merges holds '{m}', not a pair"),
            })
            .collect::<Result<_>>()?;
        let types: Vec<i32> = match c.metadata.get("tokenizer.ggml.token_type") {
            Some(Value::Array(v)) => v.iter().map(|t| t.to_i32().unwrap_or(1)).collect(),
            _ => vec![1; tokens.len()],
        };
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut bpe = BPE::builder().vocab_and_merges(vocab, merges);
        if let Some(unk) = id(c, "tokenizer.ggml.unknown_token_id") {
            if let Some(t) = tokens.get(unk as usize) {
                bpe = bpe.unk_token(t.clone());
            }
        }
        let bpe = bpe
            .build()
            .map_err(|e| anyhow::anyhow!("its vocabulary and merges do not make a BPE ({e})"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let prefix = matches!(
            c.metadata.get("tokenizer.ggml.add_space_prefix"),
            Some(Value::Bool(true))
        );
        tokenizer.with_pre_tokenizer(Some(ByteLevel::new(prefix, false, true)));
        tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| matches!(**t, CONTROL | USER_DEFINED))
            .map(|(s, _)| AddedToken::from(s.clone(), true))
            .collect();
        tokenizer
            .add_special_tokens(special)
            .map_err(|e| anyhow::anyhow!("its special tokens cannot be added ({e})"))?;
        let mut eos = Vec::new();
        eos.extend(id(c, "tokenizer.ggml.eos_token_id"));
        eos.extend(id(c, "tokenizer.ggml.eot_token_id").filter(|t| !eos.contains(t)));
        Ok(Self {
            tokenizer,
            bos: id(c, "tokenizer.ggml.bos_token_id"),
            eos,
            template: string(c, "tokenizer.chat_template").map(str::to_string),
            token_text: tokens,
        })
    }

    /// The ids of `text`, special tokens matched as wholes, nothing added
    /// around them (transformers' `tokenizer(text)` for a GGUF with
    /// `add_bos_token` false; the chat template writes its own markers).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| anyhow::anyhow!("cannot tokenize the prompt ({e})"))?;
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
        )
    }
}

/// Renders a chat template as transformers does (`utils/chat_template_utils.py`:
/// a sandboxed Jinja environment with `trim_blocks` and `lstrip_blocks`, the
/// `loopcontrols` extension, `raise_exception` and `tojson`).
pub fn render(template: &str, user: &str, bos: &str, eos: &str) -> Result<String> {
    let mut env = minijinja::Environment::new();
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
    t.render(ctx)
        .map_err(|e| anyhow::anyhow!("its chat template fails on the prompt ({e})"))
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
        assert_eq!(render(t, "hi", "", "").unwrap(), "  hi\n");
        let e = render("{{ raise_exception('no system role') }}", "x", "", "").unwrap_err();
        assert!(e.to_string().contains("no system role"), "{e}");
        assert!(render("{% if %}", "x", "", "")
            .unwrap_err()
            .to_string()
            .starts_with("its chat template does not parse"));
        // Python's string methods, as Llama 3's templates call them.
        assert_eq!(
            render("{{ messages[0].content.strip() }}", " a ", "", "").unwrap(),
            "a"
        );
    }
}
