//! The decoder block itself, built from candle-nn: RMSNorm, Q/K/V/O
//! projections (`Linear`), rotary embedding (non-interleaved, as Llama's), causal
//! attention (Q K^T / sqrt(d), softmax, times V), residual adds, RMSNorm, and a
//! SwiGLU MLP (down(silu(gate(x)) * up(x))). [`HostWeights`] are made once from a
//! seed on the host in f32 and are what `--save-weights` writes (safetensors,
//! the names of [`HostWeights::named`]); a [`Block`] is them in one dtype on one
//! device. The forward pass runs with candle-nn's fused kernels, or with the
//! same math from primitive ops (the f64 reference).

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor, D};
use candle_nn::{Linear, Module};
use rand::{rngs::StdRng, Rng, SeedableRng};

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
        let (b, t, h, m) = (s.batch, s.seq, s.hidden, s.mlp);
        let (heads, d) = (s.heads, s.head_dim);
        let mut make = |shape: &[usize], scale: f32, offset: f32| -> Result<Tensor> {
            let n = shape.iter().product();
            let v: Vec<f32> = normal(&mut rng, n, scale)
                .into_iter()
                .map(|x| x + offset)
                .collect();
            Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
        };
        let wh = 1.0 / (h as f32).sqrt();
        let wm = 1.0 / (m as f32).sqrt();
        let tensors = vec![
            ("x_prefill", make(&[b, t, h], 1.0, 0.0)?),
            ("x_decode", make(&[b, 1, h], 1.0, 0.0)?),
            ("k_cache", make(&[b, heads, t, d], 1.0, 0.0)?),
            ("v_cache", make(&[b, heads, t, d], 1.0, 0.0)?),
            ("attn_norm", make(&[h], 0.1, 1.0)?),
            ("wq", make(&[h, h], wh, 0.0)?),
            ("wk", make(&[h, h], wh, 0.0)?),
            ("wv", make(&[h, h], wh, 0.0)?),
            ("wo", make(&[h, h], wh, 0.0)?),
            ("mlp_norm", make(&[h], 0.1, 1.0)?),
            ("w_gate", make(&[m, h], wh, 0.0)?),
            ("w_up", make(&[m, h], wh, 0.0)?),
            ("w_down", make(&[h, m], wm, 0.0)?),
        ];
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

/// The block in one dtype on one device, with its inputs.
pub struct Block {
    pub shape: BlockShape,
    attn_norm: Tensor,
    mlp_norm: Tensor,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    gate: Linear,
    up: Linear,
    down: Linear,
    pub x_prefill: Tensor,
    pub x_decode: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
}

/// Which kernels a forward pass uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// candle-nn's fused `rms_norm`, `softmax_last_dim` and `rope`: what the
    /// block is timed with.
    Fused,
    /// The same math from primitive ops (`rms_norm_slow`, `softmax`,
    /// `rope_slow`): the f64 reference, which the fused kernels are checked against.
    Composed,
}

impl Block {
    pub fn new(w: &HostWeights, s: &BlockShape, dtype: DType, device: &Device) -> Result<Self> {
        let on =
            |name: &str| -> Result<Tensor> { Ok(w.get(name)?.to_dtype(dtype)?.to_device(device)?) };
        let linear = |name: &str| -> Result<Linear> { Ok(Linear::new(on(name)?, None)) };
        Ok(Self {
            shape: s.clone(),
            attn_norm: on("attn_norm")?,
            mlp_norm: on("mlp_norm")?,
            wq: linear("wq")?,
            wk: linear("wk")?,
            wv: linear("wv")?,
            wo: linear("wo")?,
            gate: linear("w_gate")?,
            up: linear("w_up")?,
            down: linear("w_down")?,
            x_prefill: on("x_prefill")?,
            x_decode: on("x_decode")?,
            k_cache: on("k_cache")?,
            v_cache: on("v_cache")?,
        })
    }

    /// The seven projections, in order: Q, K, V, O, gate, up, down.
    pub fn linears(&self) -> [&Linear; 7] {
        [
            &self.wq, &self.wk, &self.wv, &self.wo, &self.gate, &self.up, &self.down,
        ]
    }

    /// The two norms' scales: before attention, before the MLP.
    pub fn norms(&self) -> (&Tensor, &Tensor) {
        (&self.attn_norm, &self.mlp_norm)
    }

    /// The phase's input.
    pub fn input(&self, phase: Phase) -> &Tensor {
        match phase {
            Phase::Prefill => &self.x_prefill,
            Phase::Decode => &self.x_decode,
        }
    }

    /// cos and sin tables (positions x head_dim / 2) for `len` positions from
    /// `start`, frequencies theta^(-2i/d) (RoFormer; Llama's base 10000).
    pub fn rope_tables(&self, start: usize, len: usize, dtype: DType) -> Result<(Tensor, Tensor)> {
        let d = self.shape.head_dim;
        let theta = self.shape.rope_theta;
        let mut cos = Vec::with_capacity(len * d / 2);
        let mut sin = Vec::with_capacity(len * d / 2);
        for pos in start..start + len {
            for i in 0..d / 2 {
                let angle = pos as f64 * theta.powf(-2.0 * i as f64 / d as f64);
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        let device = self.x_prefill.device();
        let table = |v: Vec<f64>| -> Result<Tensor> {
            Ok(Tensor::from_vec(v, (len, d / 2), &Device::Cpu)?
                .to_dtype(dtype)?
                .to_device(device)?)
        };
        Ok((table(cos)?, table(sin)?))
    }

    /// The causal mask for `t` queries over `t` keys: 0 on and below the
    /// diagonal, -inf above.
    pub fn causal_mask(&self, t: usize, dtype: DType) -> Result<Tensor> {
        let v: Vec<f32> = (0..t)
            .flat_map(|i| (0..t).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        Ok(Tensor::from_vec(v, (t, t), &Device::Cpu)?
            .to_dtype(dtype)?
            .to_device(self.x_prefill.device())?)
    }

    /// One block call on `x` (batch, tokens, hidden): prefill attends causally
    /// within `x`; decode appends `x`'s keys and values to the cache and attends
    /// to all of it. `aux` holds the rope tables and mask, made off the clock.
    pub fn forward(&self, x: &Tensor, phase: Phase, aux: &Aux, k: Kernels) -> Result<Tensor> {
        let (b, t, h) = x.dims3()?;
        let (heads, d) = (self.shape.heads, self.shape.head_dim);
        let eps = self.shape.rms_eps as f32;
        let norm = |x: &Tensor, w: &Tensor| -> Result<Tensor> {
            Ok(match k {
                Kernels::Fused => candle_nn::ops::rms_norm(x, w, eps)?,
                Kernels::Composed => candle_nn::ops::rms_norm_slow(x, w, eps)?,
            })
        };
        let heads_of = |y: Tensor| -> Result<Tensor> {
            Ok(y.reshape((b, t, heads, d))?.transpose(1, 2)?.contiguous()?)
        };
        let rope = |y: &Tensor| -> Result<Tensor> {
            Ok(match k {
                Kernels::Fused => candle_nn::rotary_emb::rope(y, &aux.cos, &aux.sin)?,
                Kernels::Composed => candle_nn::rotary_emb::rope_slow(y, &aux.cos, &aux.sin)?,
            })
        };
        let xn = norm(x, &self.attn_norm)?;
        let q = rope(&heads_of(self.wq.forward(&xn)?)?)?;
        let mut keys = rope(&heads_of(self.wk.forward(&xn)?)?)?;
        let mut values = heads_of(self.wv.forward(&xn)?)?;
        if phase == Phase::Decode {
            keys = Tensor::cat(&[&self.k_cache, &keys], 2)?;
            values = Tensor::cat(&[&self.v_cache, &values], 2)?;
        }
        let mut scores = (q.matmul(&keys.t()?)? * (1.0 / (d as f64).sqrt()))?;
        if let Some(mask) = &aux.mask {
            scores = scores.broadcast_add(mask)?;
        }
        let probs = match k {
            Kernels::Fused => candle_nn::ops::softmax_last_dim(&scores)?,
            Kernels::Composed => candle_nn::ops::softmax(&scores, D::Minus1)?,
        };
        let attn = probs
            .matmul(&values)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, t, h))?;
        let h1 = (x + self.wo.forward(&attn)?)?;
        let hn = norm(&h1, &self.mlp_norm)?;
        let act = (candle_nn::ops::silu(&self.gate.forward(&hn)?)? * self.up.forward(&hn)?)?;
        Ok((&h1 + self.down.forward(&act)?)?)
    }

    /// What a forward pass of `phase` needs beyond the weights, made once.
    pub fn aux(&self, phase: Phase, dtype: DType) -> Result<Aux> {
        let t = self.input(phase).dim(1)?;
        let (start, mask) = match phase {
            Phase::Prefill => (0, Some(self.causal_mask(t, dtype)?)),
            Phase::Decode => (self.shape.seq, None),
        };
        let (cos, sin) = self.rope_tables(start, t, dtype)?;
        Ok(Aux { cos, sin, mask })
    }
}

/// The rope tables for a phase's positions and, in prefill, the causal mask.
pub struct Aux {
    pub cos: Tensor,
    pub sin: Tensor,
    pub mask: Option<Tensor>,
}
