//! Rotary embedding, the non-interleaved layout (each head's first and second
//! halves are the pairs, as Hugging Face's Llama): for a head's values x and
//! position p, `y[i] = x[i] cos - x[i + d/2] sin` and `y[i + d/2] = x[i + d/2]
//! cos + x[i] sin`, with the angle of pair i at p (what
//! `candle_nn::rotary_emb::rope` computes, from the same cos and sin tables);
//! and [`heads`], a projection's output cut into heads, rotated or not.
//!
//! The ideas: no hand-off for nothing, and no copy for nothing. candle-nn's
//! CPU rope shares its rows over rayon's global pool even for the few
//! hundred values of a decode step; here the rows go to Candle's own
//! spinning pool only when there are enough of them to pay for it
//! ([`super::cpu::split`]), else the calling thread does them. Measured
//! inside SmolLM2's decode steps (`generate`'s parts, 2-core VM): 0.05 ms a
//! token against candle-nn's 0.07-0.10, of a 20-50 ms token: a small saving.
//! (An earlier reading of 10% of the token was the q and k projections booked
//! as rotary by a span that held them too.) And the input is read where it
//! lies, any layout whose rows of `head_dim` are contiguous: a prompt's
//! stacked Q/K/V output, (batch, tokens, heads x head_dim) with the other
//! projections' columns between its rows, goes to (batch, heads, tokens,
//! head_dim) in the one pass that rotates it, where the composed form
//! copied it twice (a reshape of the strided view, then the transpose made
//! contiguous) before rotating it into a third tensor. On a GPU candle-nn's
//! kernel runs, on contiguous copies of what is not: a launch either way.

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp1, CustomOp3, Layout, Result, Shape, Tensor};

use super::cpu::{output, split, Elem};
use super::{as_is_or_copied, check_dtype, contiguous};

/// `x` (batch, heads, tokens, head_dim) rotated by `cos` and `sin` (tokens,
/// head_dim / 2), all three of one dtype (f32, f16 or bf16; computed in f32).
/// Returns a contiguous tensor; `x` may be any view whose rows of head_dim
/// are contiguous (a transposed q, say), read in place on the CPU.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, n, t, d) = x.dims4()?;
    check_tables(x, t, d, cos, sin)?;
    check_dtype("rope", x.dtype())?;
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let (cos, sin) = (contiguous(cos)?, contiguous(sin)?);
    if !x.device().is_cpu() {
        // candle-nn's rope refuses an input that is not contiguous (a
        // transposed q or k), on every device: hence the copies.
        return candle_nn::rotary_emb::rope(&*contiguous(x)?, &cos, &sin);
    }
    let x = rows_apart(x)?;
    let op = Heads {
        op: "rope",
        b,
        n,
        t,
        d,
    };
    x.apply_op3_no_bwd(&cos, &sin, &op)
}

/// `x` (batch, tokens, heads x head_dim), a projection's output or a view of
/// one, as (batch, heads, tokens, head_dim), contiguous: each head's rows
/// together, rotated by `tables` (cos and sin, (tokens, head_dim / 2)) when
/// given, as [`rope`]. What `x.reshape((b, t, heads, d))?.transpose(1,
/// 2)?.contiguous()` and then [`rope`] give, in one pass over `x` on the CPU
/// (any view whose rows of head_dim are contiguous is read where it lies).
pub fn heads(x: &Tensor, heads: usize, tables: Option<(&Tensor, &Tensor)>) -> Result<Tensor> {
    let (b, t, w) = x.dims3()?;
    if heads == 0 || !w.is_multiple_of(heads) {
        bail!("lab heads: {w} columns are not {heads} heads");
    }
    let d = w / heads;
    if let Some((cos, sin)) = tables {
        check_tables(x, t, d, cos, sin)?;
    }
    check_dtype("heads", x.dtype())?;
    if !x.device().is_cpu() || x.elem_count() == 0 {
        let split = x.reshape((b, t, heads, d))?.transpose(1, 2)?.contiguous()?;
        return match tables {
            Some((cos, sin)) => rope(&split, cos, sin),
            None => Ok(split),
        };
    }
    let x = rows_apart(x)?;
    let op = Heads {
        op: "heads",
        b,
        n: heads,
        t,
        d,
    };
    match tables {
        Some((cos, sin)) => x.apply_op3_no_bwd(&*contiguous(cos)?, &*contiguous(sin)?, &op),
        None => x.apply_op1_no_bwd(&op),
    }
}

/// Refuses rotary tables that are not (t, d / 2) of `x`'s dtype, or an odd d.
fn check_tables(x: &Tensor, t: usize, d: usize, cos: &Tensor, sin: &Tensor) -> Result<()> {
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
    Ok(())
}

/// `x` itself when its last dimension is contiguous, else a contiguous copy.
fn rows_apart(x: &Tensor) -> Result<std::borrow::Cow<'_, Tensor>> {
    as_is_or_copied(x, x.stride().last() == Some(&1))
}

/// The op of [`rope`] and [`heads`]: (batch, heads, tokens, head_dim) out,
/// each row of head_dim read from wherever the input's layout puts it.
struct Heads {
    /// Its name in errors.
    op: &'static str,
    b: usize,
    n: usize,
    t: usize,
    d: usize,
}

/// Elements worth a thread's task of their own: a multiply-add or two each.
const MIN_TASK: usize = 32 << 10;

impl Heads {
    /// Where row (batch, head, token) of the input starts: the start and the
    /// three strides, from a 4-d (batch, heads, tokens, d) layout or a 3-d
    /// (batch, tokens, heads x d) one, checked to lie inside `len`.
    fn strides(&self, l: &Layout, len: usize) -> Result<(usize, [usize; 3])> {
        let (s, op) = (l.stride(), self.op);
        if self.d > 1 && s.last() != Some(&1) {
            bail!("lab {op}: the input's rows of head_dim are not contiguous");
        }
        let strides = match s.len() {
            4 => [s[0], s[1], s[2]],
            3 => [s[0], self.d, s[1]],
            r => bail!("lab {op}: an input of rank {r} (3 or 4)"),
        };
        let dims = [self.b, self.n, self.t];
        let last: usize = dims.iter().zip(strides).map(|(&n, s)| (n - 1) * s).sum();
        if l.start_offset() + last + self.d > len {
            bail!("lab {op}: the input's rows lie past its storage");
        }
        Ok((l.start_offset(), strides))
    }

    fn run<E: Elem>(
        &self,
        x: &[E],
        (start, [sb, sh, st]): (usize, [usize; 3]),
        tables: Option<(&[E], &[E])>,
    ) -> CpuStorage {
        let (n, t, d) = (self.n, self.t, self.d);
        let half = d / 2;
        output(self.b * n * t * d, |dst: &mut [MaybeUninit<E>]| {
            split(dst, d, MIN_TASK, |first, chunk| {
                for (k, out) in chunk.chunks_mut(d).enumerate() {
                    let row = first / d + k;
                    let (bi, h, p) = (row / (n * t), (row / t) % n, row % t);
                    let at = start + bi * sb + h * sh + p * st;
                    let src = &x[at..at + d];
                    let Some((cos, sin)) = tables else {
                        out.write_copy_of_slice(src);
                        continue;
                    };
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

    fn shape(&self) -> Shape {
        Shape::from((self.b, self.n, self.t, self.d))
    }
}

impl CustomOp1 for Heads {
    fn name(&self) -> &'static str {
        "lab-heads"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match s {
            CpuStorage::F32(x) => self.run(x, self.strides(l, x.len())?, None),
            CpuStorage::F16(x) => self.run(x, self.strides(l, x.len())?, None),
            CpuStorage::BF16(x) => self.run(x, self.strides(l, x.len())?, None),
            other => return super::unsupported("heads", other.dtype()),
        };
        Ok((out, self.shape()))
    }
}

impl CustomOp3 for Heads {
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
        let ((c, d), (e, f)) = (super::span("rope", l2)?, super::span("rope", l3)?);
        let out = match (s1, s2, s3) {
            (CpuStorage::F32(x), CpuStorage::F32(y), CpuStorage::F32(z)) => {
                self.run(x, self.strides(l1, x.len())?, Some((&y[c..d], &z[e..f])))
            }
            (CpuStorage::F16(x), CpuStorage::F16(y), CpuStorage::F16(z)) => {
                self.run(x, self.strides(l1, x.len())?, Some((&y[c..d], &z[e..f])))
            }
            (CpuStorage::BF16(x), CpuStorage::BF16(y), CpuStorage::BF16(z)) => {
                self.run(x, self.strides(l1, x.len())?, Some((&y[c..d], &z[e..f])))
            }
            _ => bail!("lab rope: the input and the tables must be one dtype of f32, f16, bf16"),
        };
        Ok((out, self.shape()))
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
        // A view at an offset (the tokens cut from a longer tensor) reads right.
        let long = Tensor::randn(0f32, 1.0, (2, 3, 9, 8), dev).unwrap();
        let (view, cos, sin) = (
            long.narrow(2, 4, 5).unwrap(),
            Tensor::randn(0f32, 1.0, (5, 4), dev).unwrap(),
            Tensor::randn(0f32, 1.0, (5, 4), dev).unwrap(),
        );
        let (a, b) = (
            rope(&view, &cos, &sin).unwrap(),
            rope(&view.contiguous().unwrap(), &cos, &sin).unwrap(),
        );
        let same = (a - b).unwrap().abs().unwrap().max_all().unwrap();
        assert_eq!(same.to_scalar::<f32>().unwrap(), 0.0);
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

    /// `heads` on a view of a stacked projection's output (its rows further
    /// apart than its width; batches of them; a view cut along the tokens),
    /// against the reshape, transpose and copy it replaces (the same bits),
    /// and rotated, against that copy rotated by this file's rope (the same
    /// bits) and by candle-nn's (within its rounding).
    fn heads_as_composed(dev: &Device) {
        for (dtype, tol) in [
            (DType::F32, 1e-6),
            (DType::F16, 2e-3),
            (DType::BF16, 1.6e-2),
        ] {
            let cases = [
                (1, 1, 9, 64, 6, 0),
                (1, 7, 3, 8, 5, 0),
                (2, 5, 2, 16, 0, 0),
                (2, 5, 3, 8, 4, 0),
                (3, 4, 2, 8, 1, 2),
            ];
            for (b, t, n, d, other, skip) in cases {
                let stacked =
                    Tensor::randn(0f32, 1.0, (b, t + skip, (n + other) * d), dev).unwrap();
                let stacked = stacked.to_dtype(dtype).unwrap().narrow(1, skip, t).unwrap();
                let x = stacked.narrow(2, other * d, n * d).unwrap();
                let cos = Tensor::randn(0f32, 1.0, (t, d / 2), dev).unwrap();
                let sin = Tensor::randn(0f32, 1.0, (t, d / 2), dev).unwrap();
                let [cos, sin] = [cos, sin].map(|v| v.to_dtype(dtype).unwrap());
                let split = x
                    .contiguous()
                    .unwrap()
                    .reshape((b, t, n, d))
                    .unwrap()
                    .transpose(1, 2)
                    .unwrap()
                    .contiguous()
                    .unwrap();
                let bits = |v: &Tensor| {
                    let v = v.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
                    v.to_vec1::<f32>().unwrap()
                };
                let plain = heads(&x, n, None).unwrap();
                assert_eq!(plain.dims(), [b, n, t, d]);
                assert_eq!(bits(&plain), bits(&split), "{dtype:?} {:?}", (b, t, n, d));
                let rotated = heads(&x, n, Some((&cos, &sin))).unwrap();
                let want = rope(&split, &cos, &sin).unwrap();
                assert_eq!(bits(&rotated), bits(&want), "{dtype:?} {:?}", (b, t, n, d));
                let nn = bits(&candle_nn::rotary_emb::rope(&split, &cos, &sin).unwrap());
                let scale = nn.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (g, w) in bits(&rotated).iter().zip(&nn) {
                    assert!((g - w).abs() <= tol * scale, "{dtype:?} {g} vs {w}");
                }
            }
        }
        let x = Tensor::zeros((1, 2, 10), DType::F32, dev).unwrap();
        let e = heads(&x, 3, None).unwrap_err().to_string();
        assert!(e.contains("10 columns are not 3 heads"), "{e}");
    }

    #[test]
    fn rope_is_candle_nns_rope_cpu() {
        against_candle_nn(&Device::Cpu);
    }

    #[test]
    fn heads_are_the_composed_split_cpu() {
        heads_as_composed(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn heads_are_the_composed_split_cuda() {
        heads_as_composed(&Device::new_cuda(0).unwrap());
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn rope_is_candle_nns_rope_cuda() {
        against_candle_nn(&Device::new_cuda(0).unwrap());
    }
}
