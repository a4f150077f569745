//! The suite's matrix-vector kernels (`kernels::linear` on float weights,
//! `kernels::QLinear` on GGUF blocks) are right before they are fast: each
//! output against an f64 product computed here, within a bound derived from
//! what the kernel is allowed to lose (stated at each), and against Candle's
//! own op (`matmul`, `QMatMul`); for one row and many, odd sizes, weight rows
//! not a multiple of the kernels' groups of four, activation rows beyond one
//! pass (64), every instruction-set tier this CPU has, one thread and the
//! whole pool (which must agree bit for bit); and bad input is one error.
//! One device-generic body per test: the CPU always, CUDA under the feature.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};
use candle_lab::kernels::{self, FloatTier, QLinear, QuantTier, Threads};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// (activation rows, k, weight rows): a decode row, odd widths, weight rows
/// not a multiple of 4, and 70 rows (two passes of 64).
const FLOAT_SHAPES: [(usize, usize, usize); 8] = [
    (1, 1, 1),
    (1, 7, 3),
    (1, 576, 576),
    (3, 577, 13),
    (5, 1001, 37),
    (4, 33, 6),
    (70, 40, 9),
    (2, 4096, 5),
];

fn random(shape: &[usize], seed: u64, scale: f32) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    (0..n)
        .map(|_| (0..4).map(|_| rng.random::<f32>() - 0.5).sum::<f32>() * 1.7 * scale)
        .collect()
}

fn tensor(v: Vec<f32>, shape: &[usize], dtype: DType, device: &Device) -> Tensor {
    Tensor::from_vec(v, shape, &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
        .to_device(device)
        .unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .to_device(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
}

/// For x (m x k) and w (n x k): the f64 products and the sums of |w x|.
fn reference(x: &[f64], w: &[f64], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut want = vec![0.0; m * n];
    let mut abs = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (xr, wr) = (&x[i * k..(i + 1) * k], &w[j * k..(j + 1) * k]);
            want[i * n + j] = xr.iter().zip(wr).map(|(a, b)| a * b).sum();
            abs[i * n + j] = xr.iter().zip(wr).map(|(a, b)| (a * b).abs()).sum();
        }
    }
    (want, abs)
}

/// Fails at the worst element when |got - want| exceeds its bound.
fn assert_within(what: &str, got: &[f64], want: &[f64], bound: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, ((g, w), b)) in got.iter().zip(want).zip(bound).enumerate() {
        assert!(
            (g - w).abs() <= *b,
            "{what}: element {i} is {g} for {w} (bound {b:e}, off by {:e})",
            (g - w).abs()
        );
    }
}

/// Half an ulp of the output, relative: the one rounding of an f32 sum.
fn unit(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => 2f64.powi(-24),
        DType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-8),
    }
}

/// Float: the output's rounding, u |want|, plus the f32 sum's error, at most
/// k 2^-24 sum |w x| (Higham's gamma_k; the inputs are exact in f32, and so
/// are the products of two 16-bit values).
fn float_bound(dtype: DType, k: usize, want: &[f64], abs: &[f64]) -> Vec<f64> {
    let sum = k as f64 * 2f64.powi(-24);
    want.iter()
        .zip(abs)
        .map(|(w, a)| unit(dtype) * w.abs() + sum * a + 1e-30)
        .collect()
}

fn linear_on(device: &Device) {
    let tiers = if device.is_cpu() {
        FloatTier::available()
    } else {
        vec![FloatTier::detect()]
    };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (s, &(m, k, n)) in FLOAT_SHAPES.iter().enumerate() {
            let x = tensor(random(&[m, k], s as u64, 1.0), &[m, k], dtype, device);
            let w = tensor(random(&[n, k], 50 + s as u64, 0.1), &[n, k], dtype, device);
            let (want, abs) = reference(&values(&x), &values(&w), m, k, n);
            let bound = float_bound(dtype, k, &want, &abs);
            let what = |t: &str| format!("linear {m}x{k} by {n}x{k} {} {t}", dtype.as_str());
            let pool = kernels::linear(&x, &w).unwrap();
            assert_eq!(pool.dims(), [m, n]);
            assert_within(&what("pool"), &values(&pool), &want, &bound);
            for &tier in &tiers {
                for threads in [Threads::Pool, Threads::One] {
                    let got = kernels::linear_on(&x, &w, threads, tier).unwrap();
                    let got = values(&got);
                    assert_within(&what(tier.name()), &got, &want, &bound);
                    if tier == FloatTier::detect() {
                        assert_eq!(got, values(&pool), "{}: threads change nothing", what(""));
                    }
                }
            }
            // Candle's matmul rounds the same sum its own way: twice the bound.
            let candle = values(&x.matmul(&w.t().unwrap()).unwrap());
            let twice: Vec<f64> = bound.iter().map(|b| 2.0 * b).collect();
            assert_within(&what("vs candle"), &values(&pool), &candle, &twice);
        }
        // Rank 3, and a transposed (non-contiguous) input: the same values.
        let x = tensor(random(&[2, 3, 64], 90, 1.0), &[2, 3, 64], dtype, device);
        let w = tensor(random(&[10, 64], 91, 0.1), &[10, 64], dtype, device);
        let y = kernels::linear(&x, &w).unwrap();
        assert_eq!(y.dims(), [2, 3, 10]);
        let flat = kernels::linear(&x.reshape((6, 64)).unwrap(), &w).unwrap();
        assert_eq!(values(&y), values(&flat));
        let xt = tensor(random(&[64, 5], 92, 1.0), &[64, 5], dtype, device);
        let strided = kernels::linear(&xt.t().unwrap(), &w).unwrap();
        let plain = kernels::linear(&xt.t().unwrap().contiguous().unwrap(), &w).unwrap();
        assert_eq!(values(&strided), values(&plain));
    }
}

/// The block types the quantized kernels read, with shapes (m, k, n) whose
/// k is whole blocks: decode rows, weight rows not a multiple of 4,
/// activation rows not a multiple of the tile (4: 13 is three and a row) and
/// beyond one pass (64).
fn quant_cases(t: GgmlDType) -> Vec<(usize, usize, usize)> {
    if t.block_size() == 256 {
        vec![
            (1, 256, 3),
            (1, 1536, 576),
            (5, 512, 19),
            (13, 256, 11),
            (66, 256, 5),
        ]
    } else {
        vec![
            (1, 32, 1),
            (1, 576, 576),
            (3, 96, 13),
            (7, 1536, 37),
            (13, 96, 11),
            (65, 64, 9),
        ]
    }
}

const QUANT: [GgmlDType; 10] = [
    GgmlDType::Q8_0,
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q2K,
    GgmlDType::Q3K,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
    GgmlDType::Q6K,
];

/// What quantizing the activations may cost: each value is off by at most
/// half a step of its block's scale, max|x| / 254 (max|x| / 127 per step),
/// and the 32-value blocks' scale is kept in f16 (a further 2^-11 of max|x|
/// per value); so |error| <= sum over blocks of that times sum |w| in the
/// block. Plus the f32 sums (k 2^-24 sum |w x|, with x at most max|x|), and
/// on CUDA, where Candle's larger products dequantize the weights to f16,
/// 2^-10 sum |w x|.
fn quant_bound(t: GgmlDType, x: &[f64], w: &[f64], k: usize, n: usize, cuda: bool) -> Vec<f64> {
    let block = t.block_size();
    let step = 1.0 / 254.0 + if block == 32 { 2f64.powi(-11) } else { 0.0 };
    let m = x.len() / k;
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        let xr = &x[i * k..(i + 1) * k];
        for j in 0..n {
            let wr = &w[j * k..(j + 1) * k];
            let mut b = 0.0;
            let mut abs = 0.0;
            for (xb, wb) in xr.chunks(block).zip(wr.chunks(block)) {
                let amax = xb.iter().fold(0f64, |a, v| a.max(v.abs()));
                let wsum: f64 = wb.iter().map(|v| v.abs()).sum();
                b += amax * step * wsum;
                abs += amax * wsum;
            }
            let cuda = if cuda { 2f64.powi(-10) * abs } else { 0.0 };
            out[i * n + j] = b + 2.0 * k as f64 * 2f64.powi(-24) * abs + cuda + 1e-30;
        }
    }
    out
}

fn qlinear_on(device: &Device) {
    let tiers = if device.is_cpu() {
        QuantTier::available().to_vec()
    } else {
        vec![QuantTier::detect()]
    };
    for t in QUANT {
        for (s, (m, k, n)) in quant_cases(t).into_iter().enumerate() {
            let wf = tensor(
                random(&[n, k], 70 + s as u64, 0.1),
                &[n, k],
                DType::F32,
                &Device::Cpu,
            );
            let q = QTensor::quantize_onto(&wf, t, device).unwrap();
            let wd = values(&q.dequantize(&Device::Cpu).unwrap());
            let x = tensor(
                random(&[m, k], 80 + s as u64, 1.0),
                &[m, k],
                DType::F32,
                device,
            );
            let xv = values(&x);
            let (want, _) = reference(&xv, &wd, m, k, n);
            let bound = quant_bound(t, &xv, &wd, k, n, device.is_cuda());
            let what = |v: &str| format!("qlinear {t:?} {m}x{k} by {n}x{k} {v}");
            let lin = QLinear::new(q).unwrap();
            assert_eq!(lin.dims(), (n, k));
            let pool = values(&lin.forward(&x).unwrap());
            assert_within(&what("pool"), &pool, &want, &bound);
            // Every tier computes the portable code's integer sums; only
            // the f32 sums of the blocks' products differ (their order, FMA):
            // an eighth of the quantization's bound, as against Candle.
            let close: Vec<f64> = bound.iter().map(|b| b / 8.0).collect();
            let portable = lin.forward_on(&x, Threads::One, QuantTier::Portable);
            let portable = values(&portable.unwrap());
            for &tier in &tiers {
                let one = lin.forward_on(&x, Threads::One, tier).unwrap();
                let all = lin.forward_on(&x, Threads::Pool, tier).unwrap();
                let (one, all) = (values(&one), values(&all));
                assert_within(&what(tier.name()), &one, &want, &bound);
                assert_within(
                    &what(&format!("{} vs portable", tier.name())),
                    &one,
                    &portable,
                    &close,
                );
                assert_eq!(one, all, "{}: threads change nothing", what(tier.name()));
                // A row's sums do not depend on the tile it was in: a prompt
                // chunk's rows are the bits of each row alone (a decode step).
                for i in (0..m).filter(|_| m > 1) {
                    let row = x.narrow(0, i, 1).unwrap();
                    let alone = values(&lin.forward_on(&row, Threads::One, tier).unwrap());
                    assert_eq!(
                        alone,
                        one[i * n..(i + 1) * n],
                        "{}: row {i} alone",
                        what(tier.name())
                    );
                }
            }
            // Candle's QMatMul quantizes the activations the same way (its
            // Q8_1 sums in f16): the two agree far inside the bound above.
            // (Candle's Q4_1, Q5_0 and Q5_1 CPU dots take blocks in pairs:
            // not on 1 or 3.)
            let pairs = matches!(t, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1);
            if pairs && (k / 32) % 2 == 1 {
                continue;
            }
            let qm =
                QMatMul::from_qtensor(QTensor::quantize_onto(&wf, t, device).unwrap()).unwrap();
            let candle = values(&qm.forward(&x).unwrap());
            assert_within(&what("vs candle"), &pool, &candle, &close);
        }
    }
    // Rank 3 in, rank 3 out.
    let wf = tensor(
        random(&[6, 64], 95, 0.1),
        &[6, 64],
        DType::F32,
        &Device::Cpu,
    );
    let lin = QLinear::new(QTensor::quantize_onto(&wf, GgmlDType::Q4_1, device).unwrap()).unwrap();
    let x = tensor(
        random(&[2, 3, 64], 96, 1.0),
        &[2, 3, 64],
        DType::F32,
        device,
    );
    let y = lin.forward(&x).unwrap();
    assert_eq!(y.dims(), [2, 3, 6]);
    assert_eq!(
        values(&y),
        values(&lin.forward(&x.reshape((6, 64)).unwrap()).unwrap())
    );
}

/// Bad input is one error naming the op, never a panic.
fn refusals_on(device: &Device) {
    let err = |r: candle_core::Result<Tensor>| r.unwrap_err().to_string();
    let x = tensor(random(&[2, 8], 1, 1.0), &[2, 8], DType::F32, device);
    let w = tensor(random(&[3, 8], 2, 1.0), &[3, 8], DType::F32, device);
    let w9 = tensor(random(&[3, 9], 3, 1.0), &[3, 9], DType::F32, device);
    assert!(err(kernels::linear(&x, &w9)).contains("for a weight of 3 x 9"));
    let w1 = tensor(random(&[8], 4, 1.0), &[8], DType::F32, device);
    assert!(err(kernels::linear(&x, &w1)).contains("it must be [out, in]"));
    let w16 = w.to_dtype(DType::F16).unwrap();
    assert!(err(kernels::linear(&x, &w16)).contains("weight in f16, input in f32"));
    let x64 = x.to_dtype(DType::F64).unwrap();
    assert!(err(kernels::linear(&x64, &w)).contains("lab linear: dtype f64 is not supported"));
    let empty = Tensor::zeros((0, 8), DType::F32, device).unwrap();
    assert_eq!(kernels::linear(&empty, &w).unwrap().dims(), [0, 3]);

    let wq = tensor(random(&[4, 64], 5, 1.0), &[4, 64], DType::F32, &Device::Cpu);
    let lin = QLinear::new(QTensor::quantize_onto(&wq, GgmlDType::Q8_0, device).unwrap()).unwrap();
    let x32 = tensor(random(&[1, 32], 6, 1.0), &[1, 32], DType::F32, device);
    assert!(err(lin.forward(&x32)).contains("input of shape [1, 32] for a weight of 4 x 64"));
    let xh = tensor(random(&[1, 64], 7, 1.0), &[1, 64], DType::F16, device);
    assert!(err(lin.forward(&xh)).contains("lab qlinear: input in f16 (f32 only)"));
    // Q8_1 is an activation type (no GGUF weight is stored in it).
    let q8_1 = QTensor::quantize(&wq, GgmlDType::Q8_1).unwrap();
    let msg = QLinear::new(q8_1).err().unwrap().to_string();
    assert!(msg.contains("GGUF type Q8_1 has no kernel here"), "{msg}");
}

/// An F32 or F16 tensor in a GGUF runs on the float kernels, as f32.
#[test]
fn qlinear_takes_float_tensors() {
    let wf = tensor(random(&[5, 40], 8, 0.1), &[5, 40], DType::F32, &Device::Cpu);
    let x = tensor(random(&[3, 40], 9, 1.0), &[3, 40], DType::F32, &Device::Cpu);
    for t in [GgmlDType::F32, GgmlDType::F16] {
        let q = QTensor::quantize(&wf, t).unwrap();
        let wd = values(&q.dequantize(&Device::Cpu).unwrap());
        let lin = QLinear::new(q).unwrap();
        let (want, abs) = reference(&values(&x), &wd, 3, 40, 5);
        let got = values(&lin.forward(&x).unwrap());
        assert_within(
            &format!("{t:?}"),
            &got,
            &want,
            &float_bound(DType::F32, 40, &want, &abs),
        );
    }
}

/// Q, K and V (or gate and up) stacked compute each part's output bit for
/// bit, at a decode row and a prompt chunk; what cannot stack (Q6_K, read as
/// stored; rows not whole groups of eight; two types) comes back as it was.
#[test]
fn stacked_layers_compute_their_parts() {
    let cpu = Device::Cpu;
    let quant = |n: usize, k: usize, seed: u64, t: GgmlDType| {
        let w = tensor(random(&[n, k], seed, 0.1), &[n, k], DType::F32, &cpu);
        QLinear::new(QTensor::quantize(&w, t).unwrap()).unwrap()
    };
    for t in QUANT.into_iter().filter(|&t| t != GgmlDType::Q6K) {
        let k = 2 * t.block_size().max(48);
        let parts = [(24, 1), (8, 2), (16, 3)].map(|(n, seed)| quant(n, k, seed, t));
        for m in [1, 5] {
            let x = tensor(random(&[m, k], 4, 1.0), &[m, k], DType::F32, &cpu);
            let want: Vec<Tensor> = parts.iter().map(|p| p.forward(&x).unwrap()).collect();
            let want = Tensor::cat(&want, 1).unwrap();
            let again = [(24, 1), (8, 2), (16, 3)].map(|(n, seed)| quant(n, k, seed, t));
            let stacked = QLinear::stack(again.into())
                .ok()
                .expect("whole groups stack");
            assert_eq!(stacked.dims(), (48, k));
            assert_eq!(
                values(&stacked.forward(&x).unwrap()),
                values(&want),
                "{t:?} m {m}"
            );
        }
    }
    let refused = [
        vec![
            quant(8, 256, 1, GgmlDType::Q6K),
            quant(8, 256, 2, GgmlDType::Q6K),
        ],
        vec![
            quant(12, 64, 1, GgmlDType::Q8_0),
            quant(8, 64, 2, GgmlDType::Q8_0),
        ],
        vec![
            quant(8, 64, 1, GgmlDType::Q8_0),
            quant(8, 64, 2, GgmlDType::Q4_0),
        ],
        vec![
            quant(8, 64, 1, GgmlDType::Q8_0),
            quant(8, 96, 2, GgmlDType::Q8_0),
        ],
    ];
    for parts in refused {
        let back = QLinear::stack(parts).err().expect("refused");
        assert_eq!(back.len(), 2);
    }
}

#[test]
fn linear_cpu() {
    linear_on(&Device::Cpu);
}

#[test]
fn qlinear_cpu() {
    qlinear_on(&Device::Cpu);
}

#[test]
fn refusals_cpu() {
    refusals_on(&Device::Cpu);
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;

    fn gpu() -> Device {
        Device::new_cuda(0).expect("a CUDA device for the cuda tests")
    }

    #[test]
    fn linear_cuda() {
        linear_on(&gpu());
    }

    #[test]
    fn qlinear_cuda() {
        qlinear_on(&gpu());
    }

    #[test]
    fn refusals_cuda() {
        refusals_on(&gpu());
    }
}
