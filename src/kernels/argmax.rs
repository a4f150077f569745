//! Each row's argmax: greedy sampling's pick of the next token.
//!
//! The idea that makes it fast: sixteen lanes each keep their largest value
//! and its index, a strict greater-than per block of sixteen, one reduction
//! at the end, and the rows of a batch shared over Candle's pool. Candle's
//! CPU `argmax` compares one value at a time on one thread: 0.75 ms for a
//! batch of 16 rows of SmolLM2's 49,152 logits on the 2-core Xeon VM, about
//! a twentieth of that batch's decode step (0.05 ms at one row). The answer
//! is Candle's to the index: the first index of the largest value, a NaN
//! passed over, except a NaN first value, which Candle's scan keeps (its
//! running value starts at the row's first and nothing is greater than a
//! NaN), so the index is then 0. On a GPU, and for another dtype, Candle's
//! own op runs (on the device: only the ids come back).

use candle_core::{CpuStorage, Result, Storage, Tensor, D};

use super::rows::{share, Out, Threads};

#[cfg(target_arch = "x86_64")]
mod x86;

/// The index of the largest value in each row of `x` (its last dimension),
/// rows in order, as Candle's `argmax(D::Minus1)` gives them.
pub fn argmax_last_dim(x: &Tensor) -> Result<Vec<u32>> {
    let n = x.dims().last().copied().unwrap_or(0);
    if !x.device().is_cpu() || x.dtype() != candle_core::DType::F32 || n == 0 {
        return x.argmax(D::Minus1)?.flatten_all()?.to_vec1::<u32>();
    }
    let x = x.contiguous()?;
    let (storage, layout) = x.storage_and_layout();
    let (Storage::Cpu(CpuStorage::F32(v)), Some((a, b))) = (&*storage, layout.contiguous_offsets())
    else {
        candle_core::bail!("lab argmax: a contiguous f32 host tensor");
    };
    let data = &v[a..b];
    let rows = data.len() / n;
    let mut ids = Vec::<u32>::with_capacity(rows);
    {
        let out = Out::new(&mut ids.spare_capacity_mut()[..rows]);
        // A comparison is about a multiply-add's cost.
        share(rows, n, Threads::Pool, |range| {
            for r in range {
                // SAFETY: row r is this task's alone (`share` hands each out once).
                unsafe { out.write(r, row(&data[r * n..(r + 1) * n])) };
            }
        });
    }
    // SAFETY: every row's index was written above.
    unsafe { ids.set_len(rows) };
    Ok(ids)
}

/// The index of `x`'s largest value, as Candle's scan picks it.
fn row(x: &[f32]) -> u32 {
    // Candle's running value starts at the first: a NaN there is never
    // beaten, so its index, 0, is the answer.
    if x.first().is_none_or(|v| v.is_nan()) {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: this CPU has AVX-512F.
        return unsafe { x86::row(x) };
    }
    portable(x)
}

/// Candle's scan: replaced where a value is strictly greater.
fn portable(x: &[f32]) -> u32 {
    let (mut best, mut at) = (x[0], 0);
    for (i, &v) in x.iter().enumerate().skip(1) {
        if v > best {
            (best, at) = (v, i);
        }
    }
    at as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Candle's indices, at batch sizes over and under the pool's share, row
    /// lengths around a register, with ties (the first wins), NaN (passed
    /// over; first, kept), -inf and all-equal rows; a strided view copied.
    #[test]
    fn each_row_is_candles_argmax() {
        let dev = Device::Cpu;
        for (rows, n) in [
            (1, 1),
            (1, 15),
            (3, 16),
            (2, 17),
            (5, 100),
            (16, 4099),
            (3, 49152),
        ] {
            let x = Tensor::randn(0f32, 1.0, (rows, n), &dev).unwrap();
            let mut v = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            if n > 3 {
                // Row 0: a tie of the largest value, the later copy ignored
                // (the only row of a single-row case: nothing else planted).
                let mut i = 0;
                for (k, &x) in v[..n].iter().enumerate() {
                    if x > v[i] {
                        i = k;
                    }
                }
                let j = (i + n / 2) % n;
                v[j] = v[i];
            }
            if n > 3 && rows > 1 {
                // The last row: a NaN and a -inf in its first block, a NaN
                // in its tail and past its first block, a large value last.
                let last = (rows - 1) * n;
                v[last + 1] = f32::NAN;
                v[last + 2] = f32::NEG_INFINITY;
                v[last + n - 2] = f32::NAN;
                v[last + n / 2] = f32::NAN;
                v[last + n - 1] = 100.0;
            }
            if n > 3 && rows > 2 {
                // Row 1: +inf twice, the first one wins.
                v[n + n / 3] = f32::INFINITY;
                v[n + n - 1] = f32::INFINITY;
            }
            let mut cases = vec![Tensor::from_vec(v.clone(), (rows, n), &dev).unwrap()];
            if n > 1 {
                let mut first_nan = v.clone();
                first_nan[0] = f32::NAN;
                let mut flat = v.clone();
                flat[..n].fill(-1.5);
                cases.push(Tensor::from_vec(first_nan, (rows, n), &dev).unwrap());
                cases.push(Tensor::from_vec(flat, (rows, n), &dev).unwrap());
                cases.push(Tensor::full(f32::NEG_INFINITY, (rows, n), &dev).unwrap());
            }
            for x in cases {
                let want = x.argmax(D::Minus1).unwrap().to_vec1::<u32>().unwrap();
                assert_eq!(argmax_last_dim(&x).unwrap(), want, "{rows}x{n}");
                // The portable scan, which the AVX-512 code stands in for.
                let v = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let scan: Vec<u32> = v.chunks(n).map(portable).collect();
                assert_eq!(scan, want, "{rows}x{n} portable");
                let x3 = x.unsqueeze(1).unwrap();
                assert_eq!(argmax_last_dim(&x3).unwrap(), want, "{rows}x1x{n}");
            }
        }
        // A transposed view: copied, then each row's.
        let x = Tensor::randn(0f32, 1.0, (40, 3), &dev)
            .unwrap()
            .t()
            .unwrap();
        let want = x.argmax(D::Minus1).unwrap().to_vec1::<u32>().unwrap();
        assert_eq!(argmax_last_dim(&x).unwrap(), want);
    }

    /// The AVX-512 row against the portable scan on rows of every length to
    /// three registers and a few long ones, values drawn from a handful so
    /// that ties are common, NaN and infinities among them; skipped, and
    /// said, on a CPU without AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx512_row_is_the_scan() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("the_avx512_row_is_the_scan: no AVX-512F here, skipped");
            return;
        }
        let pool = [
            0.5,
            -1.0,
            2.0,
            2.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
        ];
        let mut state = 7u64;
        let mut draw = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            pool[(state >> 33) as usize % pool.len()]
        };
        for n in (1..=48).chain([255, 256, 1000, 4099]) {
            for _ in 0..20 {
                let mut x: Vec<f32> = (0..n).map(|_| draw()).collect();
                if x[0].is_nan() {
                    x[0] = -3.0; // a NaN first is the caller's (`row`'s) case
                }
                // SAFETY: this CPU has AVX-512F (checked above).
                let got = unsafe { x86::row(&x) };
                assert_eq!(got, portable(&x), "{x:?}");
            }
        }
    }

    #[test]
    fn other_dtypes_are_candles_own_op() {
        let x = Tensor::new(&[[1f32, 3.0, 2.0]], &Device::Cpu)
            .unwrap()
            .to_dtype(candle_core::DType::BF16)
            .unwrap();
        assert_eq!(argmax_last_dim(&x).unwrap(), [1]);
    }
}
