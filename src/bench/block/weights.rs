//! The experiment's layer with its inputs. [`HostWeights`] are made once from
//! a seed on the host in f32 and are what `--save-weights` writes
//! (safetensors, the names of [`HostWeights::named`]: the inputs, the decode's
//! KV cache, then the layer's weights); a [`Block`] is them in one dtype on one
//! device: a [`Layer`] and its inputs, with the decode's cache preallocated.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use rand::{rngs::StdRng, Rng, SeedableRng};

use super::layer_config;
use crate::model::layer::{causal_mask, Kernels, KvCache, Layer, Rope};
use crate::model::Config;
use crate::schema::{BlockShape, Phase};

/// Weights and inputs of one block in f32 on the host.
pub struct HostWeights {
    tensors: Vec<(&'static str, Tensor)>,
}

/// Standard-normal samples (Box-Muller over a seeded `StdRng`): the same
/// numbers for the same seed on every machine, never zeros.
fn normal(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            let u2: f64 = rng.random();
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            z as f32 * scale
        })
        .collect()
}

impl HostWeights {
    /// Random weights and inputs for `s`, from `seed`: projections scaled by
    /// 1/sqrt(fan-in) (so activations keep their size through the block), the
    /// norms' scales near 1, inputs and the decode KV cache standard normal.
    pub fn random(s: &BlockShape, seed: u64) -> Result<Self> {
        let mut rng = StdRng::seed_from_u64(seed);
        let cfg = layer_config(s);
        let (b, t, h) = (s.batch, s.seq, s.hidden);
        let cache = [b, cfg.kv_heads, t, cfg.head_dim];
        let mut tensors = Vec::new();
        let inputs: [(&'static str, &[usize]); 4] = [
            ("x_prefill", &[b, t, h]),
            ("x_decode", &[b, 1, h]),
            ("k_cache", &cache),
            ("v_cache", &cache),
        ];
        let weights = cfg.layer_weights();
        let all = inputs
            .into_iter()
            .chain(weights.iter().map(|(n, s)| (*n, s.as_slice())));
        for (name, shape) in all {
            let n = shape.iter().product();
            let (scale, offset) = match name {
                "attn_norm" | "mlp_norm" => (0.1, 1.0),
                _ if name.starts_with('w') => (1.0 / (shape[1] as f32).sqrt(), 0.0),
                _ => (1.0, 0.0),
            };
            let v: Vec<f32> = normal(&mut rng, n, scale)
                .into_iter()
                .map(|x| x + offset)
                .collect();
            tensors.push((name, Tensor::from_vec(v, shape, &Device::Cpu)?));
        }
        Ok(Self { tensors })
    }

    /// The tensors by name, as `--save-weights` writes them. Linear weights are
    /// (out, in), as `candle_nn::Linear` and `torch.nn.Linear` hold them.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, &Tensor)> {
        self.tensors.iter().map(|(n, t)| (*n, t))
    }

    fn get(&self, name: &str) -> Result<&Tensor> {
        self.named()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t)
            .with_context(|| format!("no weight {name}"))
    }

    /// The weights and inputs as a safetensors file's bytes.
    pub fn safetensors(&self) -> Result<Vec<u8>> {
        to_safetensors(self.named())
    }
}

/// Named tensors as a safetensors file's bytes.
pub fn to_safetensors<'a, 'b>(
    tensors: impl IntoIterator<Item = (&'a str, &'b Tensor)>,
) -> Result<Vec<u8>> {
    safetensors::tensor::serialize(tensors, None).context("writing safetensors")
}

/// The layer in one dtype on one device, with its inputs.
pub struct Block {
    pub shape: BlockShape,
    pub layer: Layer,
    pub x_prefill: Tensor,
    pub x_decode: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
}

impl Block {
    pub fn new(w: &HostWeights, s: &BlockShape, dtype: DType, device: &Device) -> Result<Self> {
        let on =
            |name: &str| -> Result<Tensor> { Ok(w.get(name)?.to_dtype(dtype)?.to_device(device)?) };
        Ok(Self {
            shape: s.clone(),
            layer: Layer::new(&layer_config(s), 0, on)?,
            x_prefill: on("x_prefill")?,
            x_decode: on("x_decode")?,
            k_cache: on("k_cache")?,
            v_cache: on("v_cache")?,
        })
    }

    pub fn config(&self) -> &Config {
        self.layer.config()
    }

    pub fn device(&self) -> &Device {
        self.x_prefill.device()
    }

    /// The phase's input.
    pub fn input(&self, phase: Phase) -> &Tensor {
        match phase {
            Phase::Prefill => &self.x_prefill,
            Phase::Decode => &self.x_decode,
        }
    }

    /// The decode's cache: the file's `seq` positions copied into a buffer of
    /// `seq + 1`, so a decode step writes its token in place and reads the
    /// whole buffer as it lies (made off the clock).
    pub fn decode_cache(&self) -> Result<KvCache> {
        let c = self.config();
        let (b, seq) = (self.shape.batch, self.shape.seq);
        let dtype = self.x_prefill.dtype();
        let mut cache = KvCache::new(b, c.kv_heads, seq + 1, c.head_dim, dtype, self.device())?;
        // One dtype: written as they are (no conversion, whichever kernels).
        cache.append(&self.k_cache, &self.v_cache, Kernels::Fused)?;
        Ok(cache)
    }

    /// What a call of `phase` on the first `tokens` of its input needs beyond
    /// the weights, made once: the rotary tables for its positions (prefill
    /// 0.., decode `seq`) and, in prefill, the causal mask.
    pub fn aux(&self, phase: Phase, tokens: usize, dtype: DType) -> Result<Aux> {
        let c = self.config();
        let (start, mask) = match phase {
            Phase::Prefill => (0, Some(causal_mask(tokens, 0, dtype, self.device())?)),
            Phase::Decode => (self.shape.seq, None),
        };
        let rope = Rope::new(
            c.head_dim,
            c.rope_theta,
            start,
            tokens,
            dtype,
            self.device(),
        )?;
        Ok(Aux { rope, mask })
    }

    /// One block call of `phase` on `x`: prefill attends causally within `x`;
    /// decode rewinds `cache` to the file's `seq` positions, writes `x`'s key
    /// and value after them and attends to all `seq + 1` (rewinding is setting
    /// a length: the step times the same work every sample).
    pub fn forward(
        &self,
        x: &Tensor,
        phase: Phase,
        aux: &Aux,
        cache: Option<&mut KvCache>,
        k: Kernels,
    ) -> Result<Tensor> {
        let cache = match (phase, cache) {
            (Phase::Prefill, _) => None,
            (Phase::Decode, Some(cache)) => {
                cache.truncate(self.shape.seq);
                Some(cache)
            }
            (Phase::Decode, None) => anyhow::bail!("a decode step needs the block's KV cache"),
        };
        self.layer
            .forward(x, &aux.rope, aux.mask.as_ref(), cache, k)
    }
}

/// The rotary tables for a call's positions and, in prefill, the causal mask.
pub struct Aux {
    pub rope: Rope,
    pub mask: Option<Tensor>,
}
