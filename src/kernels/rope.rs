//! Rotary embedding, the non-interleaved layout (each head's first and second
//! halves are the pairs, as Hugging Face's Llama): for a head's values x and
//! position p, `y[i] = x[i] cos - x[i + d/2] sin` and `y[i + d/2] = x[i + d/2]
//! cos + x[i] sin`, with the angle of pair i at p (what
//! `candle_nn::rotary_emb::rope` computes, from the same cos and sin tables).
//!
//! The idea: no hand-off for nothing. candle-nn's CPU rope shares its rows
//! over rayon's global pool even for the few hundred values of a decode step;
//! here the rows go to Candle's own spinning pool only when there are enough
//! of them to pay for it ([`super::cpu::split`]), else the calling thread does
//! them. Measured inside SmolLM2's decode steps (`generate`'s parts, 2-core
//! VM): 0.05 ms a token against candle-nn's 0.07-0.10, of a 20-50 ms token: a
//! small saving. (An earlier reading of 10% of the token was the q and k
//! projections booked as rotary by a span that held them too.) On a GPU
//! candle-nn's kernel runs, on contiguous copies of what is not: a launch
//! either way.

use std::mem::MaybeUninit;

use candle_core::{bail, CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};

use super::cpu::{output, split, Elem};
use super::{check_dtype, contiguous, span};

/// `x` (batch, heads, tokens, head_dim) rotated by `cos` and `sin` (tokens,
/// head_dim / 2), all three of one dtype (f32, f16 or bf16; computed in f32).
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (_, _, t, d) = x.dims4()?;
    for (name, table) in [("cos", cos), ("sin", sin)] {
        if table.dims() != [t, d / 2] || d % 2 == 1 {
            bail!(
                "lab rope: {name} is {:?}, the input {:?} needs ({t}, {})",
                table.dims(),
                x.dims(),
                d / 2
            );
        }
        if table.dtype() != x.dtype() {
            bail!(
                "lab rope: {name} is {}, the input {}",
                table.dtype().as_str(),
                x.dtype().as_str()
            );
        }
    }
    check_dtype("rope", x.dtype())?;
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let (x, cos, sin) = (contiguous(x)?, contiguous(cos)?, contiguous(sin)?);
    if !x.device().is_cpu() {
        // candle-nn's rope refuses an input that is not contiguous (a
        // transposed q or k), on every device: hence the copies above.
        return candle_nn::rotary_emb::rope(&x, &cos, &sin);
    }
    x.apply_op3_no_bwd(&cos, &sin, &Rope { t, d })
}

struct Rope {
    t: usize,
    d: usize,
}

/// Elements worth a thread's task of their own: a multiply-add or two each.
const MIN_TASK: usize = 32 << 10;

impl Rope {
    fn run<E: Elem>(&self, x: &[E], cos: &[E], sin: &[E]) -> CpuStorage {
        let (t, d) = (self.t, self.d);
        let half = d / 2;
        output(x.len(), |dst: &mut [MaybeUninit<E>]| {
            split(dst, d, MIN_TASK, |first, chunk| {
                for (k, out) in chunk.chunks_mut(d).enumerate() {
                    let row = first / d + k;
                    let (src, p) = (&x[row * d..(row + 1) * d], row % t);
                    let (c, s) = (
                        &cos[p * half..(p + 1) * half],
                        &sin[p * half..(p + 1) * half],
                    );
                    for i in 0..half {
                        let (a, b) = (src[i].to_f64() as f32, src[i + half].to_f64() as f32);
                        let (c, s) = (c[i].to_f64() as f32, s[i].to_f64() as f32);
                        out[i].write(E::from_f64(f64::from(a * c - b * s)));
                        out[i + half].write(E::from_f64(f64::from(b * c + a * s)));
                    }
                }
            })
        })
    }
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        "lab-rope"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let ((a, b), (c, d), (e, f)) = (span("rope", l1)?, span("rope", l2)?, span("rope", l3)?);
        let out = match (s1, s2, s3) {
            (CpuStorage::F32(x), CpuStorage::F32(y), CpuStorage::F32(z)) => {
                self.run(&x[a..b], &y[c..d], &z[e..f])
            }
            (CpuStorage::F16(x), CpuStorage::F16(y), CpuStorage::F16(z)) => {
                self.run(&x[a..b], &y[c..d], &z[e..f])
            }
            (CpuStorage::BF16(x), CpuStorage::BF16(y), CpuStorage::BF16(z)) => {
                self.run(&x[a..b], &y[c..d], &z[e..f])
            }
            _ => bail!("lab rope: the input and the tables must be one dtype of f32, f16, bf16"),
        };
        Ok((out, l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    fn against_candle_nn(dev: &Device) {
        for (dtype, tol) in [
            (DType::F32, 1e-6),
            (DType::F16, 2e-3),
            (DType::BF16, 1.6e-2),
        ] {
            // A decode step, a prefill, an odd head count, and a batch of two.
            for (b, h, t, d) in [(1, 9, 1, 64), (1, 3, 40, 64), (2, 5, 7, 16), (1, 1, 2, 2)] {
                let x = Tensor::randn(0f32, 1.0, (b, h, t, d), dev).unwrap();
                let cos = Tensor::randn(0f32, 1.0, (t, d / 2), dev).unwrap();
                let sin = Tensor::randn(0f32, 1.0, (t, d / 2), dev).unwrap();
                let [x, cos, sin] = [x, cos, sin].map(|v| v.to_dtype(dtype).unwrap());
                let got = rope(&x, &cos, &sin).unwrap();
                let want = candle_nn::rotary_emb::rope(&x, &cos, &sin).unwrap();
                let diff = (got.to_dtype(DType::F32).unwrap() - want.to_dtype(DType::F32).unwrap())
                    .unwrap()
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                // candle-nn rounds each step to the dtype, the lab once: a
                // few of the dtype's ulps at the output's scale apart.
                let scale = want.to_dtype(DType::F32).unwrap().abs().unwrap();
                let scale = scale.max_all().unwrap().to_scalar::<f32>().unwrap();
                assert!(
                    diff <= tol * scale,
                    "{dtype:?} {:?}: {diff} of {scale}",
                    (b, h, t, d)
                );
            }
        }
        // A transposed (non-contiguous) input reads right.
        let x = Tensor::randn(0f32, 1.0, (1, 4, 3, 8), dev).unwrap();
        let xt = x
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
            .transpose(1, 2)
            .unwrap();
        let cos = Tensor::randn(0f32, 1.0, (3, 4), dev).unwrap();
        let sin = Tensor::randn(0f32, 1.0, (3, 4), dev).unwrap();
        let (a, b) = (
            rope(&x, &cos, &sin).unwrap(),
            rope(&xt, &cos, &sin).unwrap(),
        );
        let same = (a - b).unwrap().abs().unwrap().max_all().unwrap();
        assert_eq!(same.to_scalar::<f32>().unwrap(), 0.0);
        // Tables of the wrong shape or dtype are one error, not a panic.
        let short = Tensor::zeros((2, 4), DType::F32, dev).unwrap();
        let e = rope(&x, &short, &sin).unwrap_err().to_string();
        assert!(e.contains("cos is [2, 4]"), "{e}");
        let half = sin.to_dtype(DType::F16).unwrap();
        assert!(rope(&x, &cos, &half).is_err());
    }

    #[test]
    fn rope_is_candle_nns_rope_cpu() {
        against_candle_nn(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn rope_is_candle_nns_rope_cuda() {
        against_candle_nn(&Device::new_cuda(0).unwrap());
    }
}
