//! The model layer every experiment shares: a GGUF file read and checked
//! ([`gguf`]), a model's configuration ([`Config`]: one sizes struct, with
//! its [`Arch`] saying what its forward pass does differently, [`arch`]),
//! its weights from the file or seeded at a named shape ([`weights`]), its
//! tokenizer and chat template ([`text`]), and the models that run it: the
//! suite's own decoder ([`decoder`]: [`layer`]s stacked, on candle-nn's
//! kernels or the suite's, from float weights or GGUF blocks as stored) and
//! candle-transformers' quantized model of each architecture ([`candle`]).
//! A row's tensors at another block type are [`quantize`]'s; the FLOPs and
//! bytes of a pass, [`cost`]'s. `block` runs one [`layer::Layer`],
//! `generate` whole models, `kernels` the matrices of their shapes; none of
//! them imports another.

pub mod arch;
pub mod candle;
pub mod config;
pub mod cost;
pub mod decoder;
pub mod gguf;
pub mod layer;
pub mod quantize;
pub mod text;
pub mod weights;

use anyhow::Result;
use candle_core::{Device, Tensor, D};

pub use arch::{Activation, Arch, Features};
pub use config::{layer_matmul_names, Config, Local};

/// A language model: logits for the last of `tokens`.
pub trait Lm {
    /// Runs `tokens` at positions `pos..`, the cache holding the `pos` tokens
    /// before them (0 starts a new sequence), and returns the last token's
    /// logits (1 x vocab).
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor>;
    /// Runs `seqs` (B sequences of one length) in lockstep at positions
    /// `pos..`, each sequence's cache holding its `pos` tokens before them,
    /// and returns each one's last-token logits (B x vocab). A batch of one
    /// is [`Lm::forward`].
    fn forward_batch(&mut self, seqs: &[Vec<u32>], pos: usize) -> Result<Tensor>;
    fn device(&self) -> &Device;
    /// Each row's next token from `logits` (B x vocab), as its kernels pick
    /// it: Candle's `argmax` ([`pick_all`]) unless the model runs the
    /// suite's kernels, whose argmax gives the same ids.
    fn pick_all(&self, logits: &Tensor) -> Result<Vec<u32>> {
        pick_all(logits)
    }
    /// The first row's next token ([`Lm::pick_all`]).
    fn pick(&self, logits: &Tensor) -> Result<u32> {
        let ids = self.pick_all(logits)?;
        ids.first()
            .copied()
            .ok_or_else(|| anyhow::anyhow!("no logits to pick from"))
    }
}

/// Each sequence's next token: argmax of each row of `logits` (B x vocab).
pub fn pick_all(logits: &Tensor) -> Result<Vec<u32>> {
    Ok(logits.argmax(D::Minus1)?.flatten_all()?.to_vec1::<u32>()?)
}

/// The ids of `seqs` as one (B, tokens) tensor, refusing ragged or empty ones.
pub fn batch_ids(seqs: &[Vec<u32>], device: &Device) -> Result<Tensor> {
    let t = seqs.first().map_or(0, Vec::len);
    anyhow::ensure!(
        t > 0 && seqs.iter().all(|s| s.len() == t),
        "a batch is sequences of one length, at least one token each"
    );
    let flat: Vec<u32> = seqs.concat();
    Ok(Tensor::from_vec(flat, (seqs.len(), t), device)?)
}

/// The next token: argmax of the logits, read back to the host.
pub fn pick(logits: &Tensor) -> Result<u32> {
    Ok(logits.argmax(D::Minus1)?.flatten_all()?.to_vec1::<u32>()?[0])
}

/// The greedy answer to `prompt`: up to `n` new tokens, ending at an EOS.
pub fn answer(lm: &mut dyn Lm, prompt: &[u32], n: usize, eos: &[u32]) -> Result<(Vec<u32>, bool)> {
    let mut out = Vec::with_capacity(n);
    let logits = lm.forward(prompt, 0)?;
    let mut next = lm.pick(&logits)?;
    for i in 0..n {
        out.push(next);
        if eos.contains(&next) {
            return Ok((out, true));
        }
        if i + 1 < n {
            let logits = lm.forward(&[next], prompt.len() + i)?;
            next = lm.pick(&logits)?;
        }
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests;
