//! Where a run's weights come from ([`Source`]): a checked GGUF file, or
//! seeded random weights (never zeros) at a named shape ([`shapes`]), by GGUF's
//! tensor names in both cases, so one loader serves both. Random weights are
//! made per tensor from the seed and the tensor's name on the host, so a
//! tensor is the same whichever row asks for it.
//!
//! A run makes them once ([`Weights::made_once`]): every tensor in f32 on the
//! host, drawn (or read from the file) on all cores and kept for every row, so
//! that a float row only moves and casts them on its device and a requantized
//! row quantizes them once. At a Llama-3.2-1B shape drawing took 14 s per
//! float row on one core when each row drew its own, which the GPU call's
//! budget could not pay five times over.

use std::collections::HashMap;

use anyhow::{bail, Result};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::gguf::{max_positions, ModelFile};
use super::{Arch, Config, Local};

/// A named shape of random weights: the architecture of a published model.
pub struct NamedShape {
    pub name: &'static str,
    /// What it is the shape of.
    pub of: &'static str,
    pub config: Config,
}

/// A Llama 3 of `layers` layers `hidden` wide, its MLP `mlp`.
fn llama3(layers: usize, hidden: usize, mlp: usize, tied: bool) -> Config {
    Config {
        arch: Arch::Llama,
        layers,
        hidden,
        heads: 32,
        kv_heads: 8,
        head_dim: hidden / 32,
        mlp,
        vocab: 128_256,
        context: max_positions(Arch::Llama),
        rope_theta: 500_000.0,
        rms_eps: 1e-5,
        tied,
        local: None,
    }
}

/// A smoke test's model of `arch`: 2 layers of width 64 (Gemma 3's: 6, so
/// that one layer of its pattern is global), 4 heads of 16 (Qwen 3 and
/// Gemma 3: of 32, wider than hidden / heads, as theirs are), 2 key/value
/// heads, MLP 128, vocabulary 256.
pub fn tiny(arch: Arch) -> Config {
    let wide = arch.features().key_length;
    Config {
        arch,
        layers: if arch == Arch::Gemma3 { 6 } else { 2 },
        hidden: 64,
        heads: 4,
        kv_heads: 2,
        head_dim: if wide { 32 } else { 16 },
        mlp: 128,
        vocab: 256,
        context: 512,
        rope_theta: 10_000.0,
        rms_eps: 1e-5,
        tied: true,
        local: (arch == Arch::Gemma3).then_some(Local {
            window: 8,
            every: 6,
            rope_theta: 1_000.0,
        }),
    }
}

/// The shapes `--shape` takes: two from their models' published
/// config.json, and `tiny` per architecture, a smoke test's (the CPU
/// rehearsal of the GPU call).
pub fn shapes() -> [NamedShape; 6] {
    [
        NamedShape {
            name: "llama-3.2-1b",
            of: "Llama 3.2 1B (16 layers, hidden 2048, 32 heads, 8 key/value heads, MLP 8192, \
                 vocabulary 128256, tied embeddings)",
            config: llama3(16, 2048, 8192, true),
        },
        NamedShape {
            name: "llama-3-8b",
            of: "Llama 3 8B (32 layers, hidden 4096, 32 heads, 8 key/value heads, MLP 14336, \
                 vocabulary 128256)",
            config: llama3(32, 4096, 14336, false),
        },
        NamedShape {
            name: "tiny",
            of: "a tiny Llama for smoke tests (2 layers, hidden 64, 4 heads, 2 key/value heads, \
                 MLP 128, vocabulary 256)",
            config: tiny(Arch::Llama),
        },
        NamedShape {
            name: "tiny-qwen2",
            of: "a tiny Qwen 2 for smoke tests (tiny's sizes, with Q, K and V biases)",
            config: tiny(Arch::Qwen2),
        },
        NamedShape {
            name: "tiny-qwen3",
            of: "a tiny Qwen 3 for smoke tests (tiny's sizes, heads of 32, Q and K normed)",
            config: tiny(Arch::Qwen3),
        },
        NamedShape {
            name: "tiny-gemma3",
            of: "a tiny Gemma 3 for smoke tests (6 layers, heads of 32, windows of 8 on five)",
            config: tiny(Arch::Gemma3),
        },
    ]
}

/// The names `--shape` takes, in [`shapes`]' order.
pub const SHAPE_NAMES: [&str; 6] = [
    "llama-3.2-1b",
    "llama-3-8b",
    "tiny",
    "tiny-qwen2",
    "tiny-qwen3",
    "tiny-gemma3",
];

/// The shape named `name`, or a line listing the names.
pub fn shape(name: &str) -> Result<NamedShape> {
    let all = shapes();
    let names: Vec<&str> = all.iter().map(|s| s.name).collect();
    match all.into_iter().find(|s| s.name == name) {
        Some(s) => Ok(s),
        None => bail!("--shape {name}: expected one of {}", names.join(", ")),
    }
}

/// Where the weights come from.
pub enum Source {
    File(Box<ModelFile>),
    Random { shape: NamedShape, seed: u64 },
}

impl Source {
    pub fn config(&self) -> &Config {
        match self {
            Self::File(f) => &f.config,
            Self::Random { shape, .. } => &shape.config,
        }
    }

    /// The tensor `name` as the source holds it, on the host: the file's
    /// stored blocks, or f32 random values.
    pub fn stored(&self, name: &str) -> Result<QTensor> {
        match self {
            Self::File(f) => f.tensor(name, &Device::Cpu),
            Self::Random { .. } => Ok(QTensor::quantize(&self.f32(name)?, GgmlDType::F32)?),
        }
    }

    /// The tensor `name` in f32 on the host: the file's dequantized, or
    /// drawn (random weights are f32: no copy is made on the way).
    pub fn f32(&self, name: &str) -> Result<Tensor> {
        match self {
            Self::File(f) => Ok(f.tensor(name, &Device::Cpu)?.dequantize(&Device::Cpu)?),
            Self::Random { shape, seed } => {
                let dims = shape
                    .config
                    .tensors()
                    .into_iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, s)| s);
                let Some(dims) = dims else {
                    bail!("no tensor {name} in a {} shape", shape.name)
                };
                random(name, &dims, *seed)
            }
        }
    }

    /// The layers' stored matmul type (random weights: F32).
    pub fn layer_type(&self) -> GgmlDType {
        match self {
            Self::File(f) => f.layer_type(),
            Self::Random { .. } => GgmlDType::F32,
        }
    }
}

/// The weights the rows of one run are made from: the source, and (once made)
/// every tensor of it in f32 on the host.
pub struct Weights<'a> {
    source: &'a Source,
    f32: HashMap<String, Tensor>,
}

impl<'a> Weights<'a> {
    /// Nothing kept: each ask reads or draws its tensor again (one model
    /// alone, as the tests load it).
    pub fn uncached(source: &'a Source) -> Self {
        Self {
            source,
            f32: HashMap::new(),
        }
    }

    /// Every tensor of `source` in f32 on the host, made once on all cores. A
    /// random tensor's values depend on the seed and its name alone, so the
    /// threads change none of them.
    pub fn made_once(source: &'a Source) -> Result<Self> {
        let f32 = source
            .config()
            .tensors()
            .into_par_iter()
            .map(|(name, _)| {
                let t = source.f32(&name)?;
                Ok((name, t))
            })
            .collect::<Result<HashMap<_, _>>>()?;
        Ok(Self { source, f32 })
    }

    /// The weights of `source`: made once (`made_once`: [`Weights::made_once`],
    /// when rows will read them in f32) or read as each asks.
    pub fn new(source: &'a Source, made_once: bool) -> Result<Self> {
        if made_once {
            Self::made_once(source)
        } else {
            Ok(Self::uncached(source))
        }
    }

    pub fn source(&self) -> &'a Source {
        self.source
    }

    pub fn config(&self) -> &'a Config {
        self.source.config()
    }

    /// The tensor `name` in f32 on the host: the one kept, else made now.
    pub fn f32(&self, name: &str) -> Result<Tensor> {
        match self.f32.get(name) {
            Some(t) => Ok(t.clone()),
            None => self.source.f32(name),
        }
    }

    /// How many tensors are kept, and their bytes (0 when none are).
    pub fn kept(&self) -> (usize, u64) {
        let bytes = self.f32.values().map(|t| t.elem_count() as u64 * 4).sum();
        (self.f32.len(), bytes)
    }
}

/// A seeded random tensor, never zero: a projection uniform in +-sqrt(3 /
/// fan-in) (variance 1 / fan-in, so activations keep their size through the
/// layers), a norm's scale 1 +- 0.1, a bias uniform in +-0.1, the embedding
/// uniform with variance 1.
/// Uniform rather than normal: a 8B model is 8 billion draws, and a small
/// fast generator (`SmallRng`) seeded from the seed and the name keeps that
/// to seconds.
pub fn random(name: &str, dims: &[usize], seed: u64) -> Result<Tensor> {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    let mut rng = SmallRng::seed_from_u64(h);
    let n: usize = dims.iter().product();
    let centre = if name.ends_with(".bias") { 0.0 } else { 1.0 };
    let v: Vec<f32> = match dims {
        [_] => (0..n)
            .map(|_| centre + 0.1 * (2.0 * rng.random::<f32>() - 1.0))
            .collect(),
        [_, fan_in] => {
            let a = if name.starts_with("token_embd") {
                3f32.sqrt()
            } else {
                (3.0 / *fan_in as f32).sqrt()
            };
            // Nonzero: a draw of exactly 0.5 maps to 0, so it is nudged.
            (0..n)
                .map(|_| {
                    let x = a * (2.0 * rng.random::<f32>() - 1.0);
                    if x == 0.0 {
                        a * 1e-3
                    } else {
                        x
                    }
                })
                .collect()
        }
        _ => bail!("{name}: a tensor of rank {}", dims.len()),
    };
    Ok(Tensor::from_vec(v, dims, &Device::Cpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tensors_are_seeded_per_name_and_never_zero() {
        let a = random("blk.0.attn_q.weight", &[64, 32], 7).unwrap();
        let b = random("blk.0.attn_q.weight", &[64, 32], 7).unwrap();
        let c = random("blk.1.attn_q.weight", &[64, 32], 7).unwrap();
        let (a, b, c) = (
            a.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            b.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            c.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a
            .iter()
            .all(|x| *x != 0.0 && x.abs() <= (3.0f32 / 32.0).sqrt()));
        let var = a.iter().map(|x| x * x).sum::<f32>() / a.len() as f32;
        assert!((var * 32.0 - 1.0).abs() < 0.2, "{var}");
        let norm = random("blk.0.attn_norm.weight", &[64], 7).unwrap();
        let norm = norm.to_vec1::<f32>().unwrap();
        assert!(norm.iter().all(|x| (0.9..=1.1).contains(x)));
    }

    #[test]
    fn weights_made_once_are_the_ones_drawn_on_demand() {
        let source = Source::Random {
            shape: shape("tiny").unwrap(),
            seed: 5,
        };
        let once = Weights::made_once(&source).unwrap();
        let names = source.config().tensors();
        assert_eq!(once.kept().0, names.len());
        let params: u64 = source.config().params();
        assert_eq!(once.kept().1, params * 4);
        for (name, _) in &names {
            let a = once.f32(name).unwrap().flatten_all().unwrap();
            let b = Weights::uncached(&source).f32(name).unwrap();
            let b = b.flatten_all().unwrap();
            assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        }
        assert_eq!(Weights::uncached(&source).kept(), (0, 0));
    }

    #[test]
    fn the_named_shapes_have_their_published_sizes() {
        // Llama 3.2 1B: 1,235,814,400 parameters (tied); Llama 3 8B: 8,030,261,248.
        assert_eq!(
            shape("llama-3.2-1b").unwrap().config.params(),
            1_235_814_400
        );
        assert_eq!(shape("llama-3-8b").unwrap().config.params(), 8_030_261_248);
        let e = shape("llama-9").err().unwrap().to_string();
        assert_eq!(
            e,
            "--shape llama-9: expected one of llama-3.2-1b, llama-3-8b, tiny, tiny-qwen2, \
             tiny-qwen3, tiny-gemma3"
        );
        let d = shape("llama-3.2-1b").unwrap().config;
        assert_eq!(d.tensors().len(), 2 + 16 * 9);
    }
}
