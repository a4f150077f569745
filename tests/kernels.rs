//! The suite's own kernels (`candle_lab::kernels`) are right before they are
//! fast: each equals an f64 reference computed here from the same (rounded)
//! inputs, and Candle's own op, within a stated tolerance per dtype, for odd
//! widths, one row, many rows (enough to be split across threads), rank 3,
//! rows taken at an offset and non-contiguous input; and a bad dtype, rank or
//! shape is one error, never a panic. One device-generic body per test, run on
//! the CPU always and on CUDA under the `cuda` feature (`*_cuda`, packed into
//! the GPU bundle). The `kernels` program itself is run at the end, as a user
//! runs it, at tiny sizes (values, files, refusals; no time asserted).

mod common;
use common::{refused, run_result};

use candle_core::{DType, Device, Tensor, D};
use candle_lab::kernels;
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Allowed error against the f64 reference: |got - want| <= rtol |want| + atol.
/// The inputs are already in the dtype, so what is left is the output's
/// rounding (half an ulp: 2^-24, 2^-11, 2^-8 relative) and f32 arithmetic.
fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (1e-5, 1e-6),
        DType::F16 => (1.5e-3, 1e-6),
        DType::BF16 => (1e-2, 1e-6),
        _ => unreachable!("the kernels run f32, f16 and bf16"),
    }
}

/// Against Candle's op, looser bounds: Candle's 16-bit CPU kernels round
/// their intermediates to the dtype (x / rms, then x w; silu, then the
/// product), and its softmax sums the exponentials in the dtype itself, which
/// over a 1000-wide row is off the f64 value by up to 2% in f16 and 20% in
/// bf16 (8 significant bits; measured here, where ours stays within the
/// reference's bound). So both sides carry error, Candle's the larger.
fn candle_tolerance(op: &str, dtype: DType) -> (f64, f64) {
    match (dtype, op) {
        (DType::F32, _) => tolerance(dtype),
        (DType::F16, "softmax") => (5e-2, 1e-5),
        (DType::BF16, "softmax") => (0.3, 1e-5),
        _ => {
            let (r, a) = tolerance(dtype);
            (4.0 * r, 4.0 * a)
        }
    }
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Shapes of the last-dimension ops: odd widths, one element, one row, rows
/// enough to be split across threads, rank 3, the block's decode row.
const SHAPES: [&[usize]; 7] = [
    &[1, 1],
    &[1, 577],
    &[3, 7],
    &[37, 1001],
    &[130, 1000],
    &[2, 3, 300],
    &[1, 1, 512],
];

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

/// Standard-normal-ish values (a sum of uniforms) times `scale`, seeded, in
/// `dtype` on `device`: never zeros, the same on every machine.
fn random(shape: &[usize], dtype: DType, device: &Device, seed: u64, scale: f32) -> Tensor {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| (0..4).map(|_| rng.random::<f32>() - 0.5).sum::<f32>() * 1.7 * scale)
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
        .to_device(device)
        .unwrap()
}

/// Fails with the worst element when `got` is off `want` by more than (rtol, atol).
fn assert_close(what: &str, got: &[f64], want: &[f64], (rtol, atol): (f64, f64)) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = (0.0, 0usize);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let excess = (g - w).abs() - (rtol * w.abs() + atol);
        let excess = if excess.is_nan() {
            f64::INFINITY
        } else {
            excess
        };
        if excess > worst.0 {
            worst = (excess, i);
        }
    }
    let i = worst.1;
    assert!(
        worst.0 <= 0.0,
        "{what}: element {i} is {} for {} (rtol {rtol}, atol {atol})",
        got[i],
        want[i]
    );
}

/// The f64 reference, row by row over the last dimension of `x`.
fn by_rows(x: &[f64], width: usize, f: impl Fn(&[f64], &mut [f64])) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for (r, o) in x.chunks(width).zip(out.chunks_mut(width)) {
        f(r, o);
    }
    out
}

fn rms_reference(x: &[f64], w: Option<&[f64]>, width: usize, eps: f64) -> Vec<f64> {
    by_rows(x, width, |r, o| {
        let inv = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / width as f64 + eps).sqrt();
        for (i, (o, v)) in o.iter_mut().zip(r).enumerate() {
            *o = v * inv * w.map_or(1.0, |w| w[i]);
        }
    })
}

fn softmax_reference(x: &[f64], width: usize) -> Vec<f64> {
    by_rows(x, width, |r, o| {
        let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
        for (o, v) in o.iter_mut().zip(r) {
            *o = (v - max).exp() / sum;
        }
    })
}

fn rms_norm_on(device: &Device) {
    let eps = 1e-5;
    for dtype in DTYPES {
        for (k, shape) in SHAPES.iter().enumerate() {
            let x = random(shape, dtype, device, k as u64, 1.0);
            let width = *shape.last().unwrap();
            let w = random(&[width], dtype, device, 100 + k as u64, 1.0);
            let (xv, wv) = (values(&x), values(&w));
            let what = format!("rms_norm {shape:?} {}", dtype.as_str());

            let ours = values(&kernels::rms_norm(&x, eps).unwrap());
            assert_close(
                &what,
                &ours,
                &rms_reference(&xv, None, width, eps as f64),
                tolerance(dtype),
            );
            let ones = Tensor::ones(width, dtype, device).unwrap();
            let candle = values(&candle_nn::ops::rms_norm(&x, &ones, eps).unwrap());
            assert_close(&what, &ours, &candle, candle_tolerance("rms_norm", dtype));

            let what = format!("rms_norm_mul {shape:?} {}", dtype.as_str());
            let ours = values(&kernels::rms_norm_mul(&x, &w, eps).unwrap());
            let want = rms_reference(&xv, Some(&wv), width, eps as f64);
            assert_close(&what, &ours, &want, tolerance(dtype));
            let candle = values(&candle_nn::ops::rms_norm(&x, &w, eps).unwrap());
            assert_close(&what, &ours, &candle, candle_tolerance("rms_norm", dtype));
        }
    }
}

fn softmax_on(device: &Device) {
    for dtype in DTYPES {
        for (k, shape) in SHAPES.iter().enumerate() {
            // Scores of a few units, as attention's are, some rows far apart.
            let x = random(shape, dtype, device, 200 + k as u64, 3.0);
            let width = *shape.last().unwrap();
            let what = format!("softmax {shape:?} {}", dtype.as_str());
            let ours = values(&kernels::softmax_last_dim(&x).unwrap());
            assert_close(
                &what,
                &ours,
                &softmax_reference(&values(&x), width),
                tolerance(dtype),
            );
            let candle = values(&candle_nn::ops::softmax_last_dim(&x).unwrap());
            assert_close(&what, &ours, &candle, candle_tolerance("softmax", dtype));
        }
        // A causal mask's -inf: those entries are exactly 0.
        let t = 5;
        let mask: Vec<f32> = (0..t * t)
            .map(|i| {
                if i % t > i / t {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
            .collect();
        let mask = Tensor::from_vec(mask, (t, t), device)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let x = (random(&[t, t], dtype, device, 7, 2.0) + mask).unwrap();
        let ours = values(&kernels::softmax_last_dim(&x).unwrap());
        let want = softmax_reference(&values(&x), t);
        assert_close("masked softmax", &ours, &want, tolerance(dtype));
        for (i, v) in ours.iter().enumerate() {
            if i % t > i / t {
                assert_eq!(*v, 0.0, "masked element {i}");
            }
        }
        // A row of nothing but -inf has no softmax: NaN, as Candle's; and a
        // masked first block of a long row adds nothing.
        let mut v = vec![f32::NEG_INFINITY; 3 * 600];
        for (i, x) in v.iter_mut().enumerate().skip(600 + 300) {
            *x = (i % 7) as f32 * 0.5;
        }
        let x = Tensor::from_vec(v, (3, 600), device)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let ours = values(&kernels::softmax_last_dim(&x).unwrap());
        let candle = values(&candle_nn::ops::softmax_last_dim(&x).unwrap());
        assert!(ours[..600].iter().all(|v| v.is_nan()) && candle[..600].iter().all(|v| v.is_nan()));
        let want = softmax_reference(&values(&x)[600..], 600);
        assert_close("masked rows", &ours[600..], &want, tolerance(dtype));
    }
}

fn elementwise_on(device: &Device) {
    let shapes: [&[usize]; 5] = [&[1], &[7], &[3, 577], &[130, 1000], &[2, 3, 301]];
    for dtype in DTYPES {
        for (k, shape) in shapes.iter().enumerate() {
            let a = random(shape, dtype, device, 300 + k as u64, 2.0);
            let b = random(shape, dtype, device, 400 + k as u64, 1.0);
            let (av, bv) = (values(&a), values(&b));
            let tol = tolerance(dtype);
            let name = |op: &str| format!("{op} {shape:?} {}", dtype.as_str());

            let copy = values(&kernels::copy(&a).unwrap());
            assert_eq!(copy, av, "{}: a copy is exact", name("copy"));

            let ours = values(&kernels::add(&a, &b).unwrap());
            let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
            assert_close(&name("add"), &ours, &want, tol);
            assert_close(&name("add"), &ours, &values(&(&a + &b).unwrap()), tol);

            let ours = values(&kernels::swiglu(&a, &b).unwrap());
            let want: Vec<f64> = av
                .iter()
                .zip(&bv)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            assert_close(&name("swiglu"), &ours, &want, tol);
            let candle = (candle_nn::ops::silu(&a).unwrap() * &b).unwrap();
            assert_close(
                &name("swiglu"),
                &ours,
                &values(&candle),
                candle_tolerance("swiglu", dtype),
            );
        }
    }
}

/// `round_to` gives Candle's `to_dtype` bit for bit (to nearest, ties to
/// even, NaN and the infinities kept, values past f16's range to infinity)
/// at lengths off the conversion's eight lanes and past a task's share, from
/// a view as from a plain tensor; another pair of dtypes is Candle's own.
fn round_to_on(device: &Device) {
    // Widening to f32 is exact and keeps a NaN's sign and payload: equal
    // f32 bits are equal 16-bit values.
    let bits = |t: &Tensor| -> Vec<u32> {
        let t = t.flatten_all().unwrap().to_dtype(DType::F32).unwrap();
        t.to_vec1::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    // Ties at f16's and bf16's last kept bits, either parity, and the edges.
    let edges = [
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        65520.0,
        -1e9,
        1e-8,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        // Subnormal results: bf16's (an f32 subnormal) and f16's (3e-5),
        // and a tie between two f16 subnormals (1.5 x 2^-24).
        1e-40,
        3e-5,
        1.5 * 2f32.powi(-24),
    ];
    for len in [1, 7, 8, 9, 3 * 577, 70_001] {
        let mut v: Vec<f32> = values(&random(&[len], DType::F32, &Device::Cpu, len as u64, 3.0))
            .iter()
            .map(|&x| x as f32)
            .collect();
        for (x, e) in v.iter_mut().zip(edges) {
            *x = e;
        }
        let x = Tensor::from_vec(v, len, device).unwrap();
        for dtype in [DType::F16, DType::BF16] {
            let ours = kernels::round_to(&x, dtype).unwrap();
            assert_eq!(ours.dtype(), dtype);
            assert_eq!(
                bits(&ours),
                bits(&x.to_dtype(dtype).unwrap()),
                "{len} {dtype:?}"
            );
        }
    }
    let x = random(&[6, 130], DType::F32, device, 9, 2.0).t().unwrap();
    let ours = kernels::round_to(&x, DType::BF16).unwrap();
    assert_eq!(ours.dims(), &[130, 6]);
    assert_eq!(
        bits(&ours),
        bits(&x.to_dtype(DType::BF16).unwrap()),
        "a transposed view"
    );
    let h = random(&[5], DType::F16, device, 10, 1.0);
    let back = kernels::round_to(&h, DType::F32).unwrap();
    assert_eq!(values(&back), values(&h), "f16 to f32 is Candle's to_dtype");
}

/// Rows at an offset into their storage (contiguous, not at its start), a
/// transposed input and a column slice (not contiguous): all give what the
/// same values, laid out plainly, give.
fn layouts_on(device: &Device) {
    for dtype in DTYPES {
        let base = random(&[40, 96], dtype, device, 500, 1.0);
        let offset = base.narrow(0, 3, 31).unwrap();
        let transposed = base.t().unwrap();
        let columns = base.narrow(1, 5, 77).unwrap();
        assert!(offset.is_contiguous() && !transposed.is_contiguous() && !columns.is_contiguous());
        for x in [&offset, &transposed, &columns] {
            let plain = x.contiguous().unwrap().copy().unwrap();
            let w = random(&[x.dim(D::Minus1).unwrap()], dtype, device, 501, 1.0);
            let pairs = [
                (kernels::rms_norm(x, 1e-6), kernels::rms_norm(&plain, 1e-6)),
                (
                    kernels::rms_norm_mul(x, &w, 1e-6),
                    kernels::rms_norm_mul(&plain, &w, 1e-6),
                ),
                (
                    kernels::softmax_last_dim(x),
                    kernels::softmax_last_dim(&plain),
                ),
                (kernels::copy(x), kernels::copy(&plain)),
                (kernels::add(x, x), kernels::add(&plain, &plain)),
                (kernels::swiglu(x, x), kernels::swiglu(&plain, &plain)),
            ];
            for (i, (got, want)) in pairs.into_iter().enumerate() {
                let (got, want) = (got.unwrap(), want.unwrap());
                assert_eq!(got.dims(), x.dims());
                assert_eq!(values(&got), values(&want), "op {i} on {:?}", x.layout());
            }
        }
        // A transposed gate with a plain up: each is read through its own layout.
        let up = transposed.contiguous().unwrap();
        let mixed = values(&kernels::swiglu(&transposed, &up).unwrap());
        let plain = values(&kernels::swiglu(&up, &up).unwrap());
        assert_eq!(mixed, plain);
        // Gate and up as a stacked projection hands them out: the two halves
        // of (batch, tokens, 2 x width), each a view with its rows apart.
        let stacked = random(&[2, 5, 2 * 33], dtype, device, 502, 1.0);
        let (gate, up) = (
            stacked.narrow(2, 0, 33).unwrap(),
            stacked.narrow(2, 33, 33).unwrap(),
        );
        let (g, u) = (gate.contiguous().unwrap(), up.contiguous().unwrap());
        for (got, want) in [
            (kernels::swiglu(&gate, &up), kernels::swiglu(&g, &u)),
            (kernels::swiglu(&gate, &u), kernels::swiglu(&g, &u)),
            (kernels::add(&gate, &up), kernels::add(&g, &u)),
        ] {
            let (got, want) = (got.unwrap(), want.unwrap());
            assert_eq!(got.dims(), [2, 5, 33]);
            assert_eq!(values(&got), values(&want), "halves of a stacked output");
        }
        // A row broadcast down a column (rows 0 apart), and columns one wide
        // (copied first): read through their layouts.
        let row = random(&[1, 40], dtype, device, 503, 1.0);
        let (wide, col) = (
            row.broadcast_as((6, 40)).unwrap(),
            base.narrow(1, 7, 1).unwrap(),
        );
        for x in [&wide, &col] {
            let plain = x.contiguous().unwrap();
            let (got, want) = (
                kernels::add(x, x).unwrap(),
                kernels::add(&plain, &plain).unwrap(),
            );
            assert_eq!(values(&got), values(&want), "{:?}", x.layout());
        }
        // A scalar is one row of one.
        let one = Tensor::new(1.5f32, device)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        assert_eq!(values(&kernels::add(&one, &one).unwrap()), [3.0]);
    }
}

/// What the ops cannot do is one error naming the op, never a panic.
fn refusals_on(device: &Device) {
    let err = |r: candle_core::Result<Tensor>| r.unwrap_err().to_string();
    let x = random(&[4, 8], DType::F32, device, 600, 1.0);
    let x64 = x.to_dtype(DType::F64).unwrap();
    let xu8 = x.to_dtype(DType::U8).unwrap();
    let scalar = Tensor::new(1f32, device).unwrap();
    let f64_msg = "dtype f64 is not supported (f32, f16 and bf16 are)";
    assert!(err(kernels::rms_norm(&x64, 1e-5)).contains(&format!("lab rms_norm: {f64_msg}")));
    assert!(err(kernels::softmax_last_dim(&x64)).contains(&format!("lab softmax: {f64_msg}")));
    assert!(err(kernels::copy(&xu8)).contains("lab copy: dtype u8 is not supported"));
    assert!(err(kernels::add(&x64, &x64)).contains(&format!("lab add: {f64_msg}")));
    assert!(err(kernels::rms_norm(&scalar, 1e-5)).contains("rank 1 or more, got a scalar"));
    assert!(
        err(kernels::softmax_last_dim(&scalar)).contains("lab softmax: needs a tensor of rank 1")
    );
    let w7 = random(&[7], DType::F32, device, 601, 1.0);
    assert!(err(kernels::rms_norm_mul(&x, &w7, 1e-5)).contains("weight of shape [7] for rows of 8"));
    let w16 = random(&[8], DType::F16, device, 602, 1.0);
    assert!(err(kernels::rms_norm_mul(&x, &w16, 1e-5)).contains("weight in f16, input in f32"));
    let y = random(&[8, 4], DType::F32, device, 603, 1.0);
    assert!(err(kernels::add(&x, &y)).contains("lab add: shapes [4, 8] and [8, 4] differ"));
    let x16 = x.to_dtype(DType::F16).unwrap();
    assert!(err(kernels::swiglu(&x, &x16)).contains("lab swiglu: dtypes f32 and f16 differ"));
    // Empty tensors come back empty, of the same shape.
    let empty = Tensor::zeros((0, 8), DType::F16, device).unwrap();
    for t in [
        kernels::rms_norm(&empty, 1e-5),
        kernels::softmax_last_dim(&empty),
        kernels::copy(&empty),
        kernels::add(&empty, &empty),
    ] {
        assert_eq!(t.unwrap().dims(), [0, 8]);
    }
}

/// The `kernels` program at tiny sizes: every op, case and precision has its
/// row, every implementation its measurement, bytes and rates agree, and the
/// CSV and the chart are written beside the JSON.
fn program_on(device: &str) {
    let args = [
        "--device",
        device,
        "--ops",
        "rms_norm,rms_norm_mul,softmax,swiglu,copy,add",
        "--cases",
        "block-decode,large",
        "--large-mib",
        "1",
        "--seq",
        "8",
        "--iters",
        "2",
        "--warmup",
        "1",
    ];
    let (json, out) = run_result("kernels", &args);
    let k = &json["kernels"];
    let rows = k["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6 * 2 * 3);
    for r in rows {
        let variants = r["variants"].as_array().unwrap();
        let names: Vec<&str> = variants
            .iter()
            .map(|v| v["implementation"].as_str().unwrap())
            .collect();
        let elementwise = ["copy", "add"].contains(&r["op"].as_str().unwrap());
        let want: &[&str] = if elementwise {
            &["lab", "candle"]
        } else {
            &["lab", "candle", "composed"]
        };
        assert_eq!(names, want, "{r}");
        // A compute roof (never for the copy and the f32 add; the unit test
        // holds which rows have one): the faster kernel at the row's width
        // on cache-resident rows, its rate in the row's bytes.
        let compute = &r["compute"];
        if r["op"] == "copy" || (r["op"] == "add" && r["precision"] == "fp32") {
            assert!(compute.is_null(), "{r}");
        } else if !compute.is_null() {
            let shape = compute["shape"].as_array().unwrap();
            assert_eq!(shape.last(), r["shape"].as_array().unwrap().last(), "{r}");
            let per_elem = r["bytes_moved"].as_f64().unwrap() / r["elements"].as_f64().unwrap();
            let want = compute["g_elements_per_s"].as_f64().unwrap() * per_elem;
            let got = compute["gb_per_s"].as_f64().unwrap();
            assert!(got > 0.0 && (got - want).abs() <= 1e-9 * want, "{r}");
            assert!(!compute["resource"].as_str().unwrap().is_empty());
            // No variant of the row runs past its roof by over 5%: a roof the
            // row beat is measured again, and dropped if beaten again.
            let roof = compute["g_elements_per_s"].as_f64().unwrap();
            for v in variants.iter().filter(|v| v["status"] == "ok") {
                let ms = v["measured"]["time_ms"].as_f64().unwrap();
                let rate = r["elements"].as_f64().unwrap() / (ms * 1e-3) / 1e9;
                assert!(rate <= 1.05 * roof, "{rate} over the roof {roof}: {r}");
            }
        }
        for v in variants {
            assert_eq!(v["status"], "ok", "{v}");
            let m = &v["measured"];
            let rate =
                r["bytes_moved"].as_f64().unwrap() / (m["time_ms"].as_f64().unwrap() * 1e-3) / 1e9;
            assert!((m["gb_per_s"].as_f64().unwrap() - rate).abs() <= 1e-9 * rate);
            assert!(m["accuracy"]["max_rel_err"].as_f64().unwrap() < 0.5);
        }
    }
    let tables = String::from_utf8_lossy(&out.stdout);
    for op in [
        "rms_norm",
        "rms_norm_mul",
        "softmax",
        "swiglu",
        "copy",
        "add",
    ] {
        assert!(tables.contains(&format!("=== {op}: ")), "{tables}");
    }
    assert!(tables.contains("slower than Candle's op"), "{tables}");
    // Each row's roofline and what binds it, in the table and the target line.
    assert!(tables.contains("% roofline, binds"), "{tables}");
    assert!(
        tables.contains("% of the roofline on") || tables.contains("% of its roofline ("),
        "{tables}"
    );
}

#[test]
fn program_cpu() {
    program_on("cpu");
}

/// The matrix-vector rows as a user asks for them: one per weight type where
/// the rows are whole blocks (no Q4_K at k = 576), each with both variants
/// measured, rates from the weight's bytes, threads held, the bound; the
/// table and the target's note; refusals.
fn matvec_program_on(device: &str) {
    let args = [
        "--device",
        device,
        "--ops",
        "matvec",
        "--models",
        "smollm2-135m",
        "--matrices",
        "k_v,down",
        "--weights",
        "fp32,bf16,q4_1,q4_k",
        "--iters",
        "2",
        "--warmup",
        "1",
    ];
    let (json, out) = run_result("kernels", &args);
    let k = &json["kernels"];
    assert!(
        k["rows"].as_array().unwrap().is_empty(),
        "no element-wise op asked for"
    );
    let rows = k["matvec"].as_array().unwrap();
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["matrix"].as_str().unwrap(),
                r["weights"].as_str().unwrap(),
            )
        })
        .collect();
    let want = [
        ("k_v", "fp32"),
        ("k_v", "bf16"),
        ("k_v", "q4_1"),
        ("down", "fp32"),
        ("down", "bf16"),
        ("down", "q4_1"),
        ("down", "q4_k"),
    ];
    assert_eq!(got, want);
    for r in rows {
        let bytes = r["weight_bytes"].as_f64().unwrap();
        assert_eq!(r["tokens"], 1);
        assert!(r["bound_ms"].as_f64().unwrap() > 0.0);
        let names: Vec<&str> = r["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["implementation"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["lab", "candle"]);
        for v in r["variants"].as_array().unwrap() {
            assert_eq!(v["status"], "ok", "{v}");
            let m = &v["measured"];
            let rate = bytes / (m["time_ms"].as_f64().unwrap() * 1e-3) / 1e9;
            assert!((m["gb_per_s"].as_f64().unwrap() - rate).abs() <= 1e-9 * rate);
            assert!(m["accuracy"]["max_rel_err"].as_f64().unwrap() < 0.05, "{v}");
            if device == "cpu" {
                assert!(m["threads_held"].as_f64().unwrap() > 0.0);
            }
        }
    }
    let tables = String::from_utf8_lossy(&out.stdout);
    assert!(tables.contains("=== matvec: y = x W^T"), "{tables}");
    assert!(tables.contains("matvec target"), "{tables}");

    refused(
        "kernels",
        &["--ops", "matvec", "--models", "gpt-2"],
        "unknown model 'gpt-2'",
    );
    refused(
        "kernels",
        &["--ops", "matvec", "--weights", "q8_1"],
        "unknown weight type 'q8_1'",
    );
    refused(
        "kernels",
        &["--ops", "matvec", "--matrices", "lm"],
        "unknown matrix 'lm'",
    );
}

#[test]
fn filters_that_select_no_matvec_row_are_refused_naming_them() {
    // Issue 52: each wrote `rows: []` and a CSV of a header, and exited 0.
    for (args, why) in [
        (
            &["--ops", "matvec", "--weights", "q8_0", "--matrices", "head", "--models", "llama-3-8b"][..],
            "--models llama-3-8b, --matrices head and --weights q8_0 select no row (llama-3-8b has no head rows)",
        ),
        (
            &["--weights", "q4_k", "--matrices", "k_v", "--models", "smollm2-135m"][..],
            "select no row (smollm2-135m k_v's rows of 576 values are not whole blocks of q4_k)",
        ),
        (
            &["--weights", "q6_k,q4_k", "--matrices", "head", "--preset", "small"][..],
            "--models smollm2-135m, --matrices head and --weights q6_k,q4_k select no row",
        ),
    ] {
        refused("kernels", args, why);
        refused("kernels", &[args, &["--dry-run"]].concat(), why);
    }
}

#[test]
fn matvec_program_cpu() {
    matvec_program_on("cpu");
}

#[test]
fn program_writes_csv_and_chart_and_refuses_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("k.json");
    let out = common::run(
        "kernels",
        &[
            "--device",
            "cpu",
            "--cases",
            "smollm2-decode",
            "--ops",
            "softmax,add",
            "--dtypes",
            "bf16",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--output",
            json.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.path().join("k.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("machine,experiment,op,case,precision,implementation"));
    // softmax: ceiling, lab, candle, composed; add: ceiling, lab, candle.
    assert_eq!(lines.len(), 1 + 4 + 3, "{csv}");
    let svg = std::fs::read_to_string(dir.path().join("k.svg")).unwrap();
    assert!(svg.contains("% of the measured copy ceiling") && svg.contains("lab bf16"));
    // compare pairs each op and case's own kernel; the bound is the ladder's
    // point, not a variant, and is not paired.
    let k = json.to_str().unwrap();
    let cmp = common::run("compare", &[k, k]);
    let table = String::from_utf8_lossy(&cmp.stdout);
    assert!(
        cmp.status.success(),
        "{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
    assert!(table.contains("kernels softmax smollm2-decode"), "{table}");
    assert!(!table.contains("kernels ceiling"), "{table}");

    refused(
        "kernels",
        &["--dtypes", "tf32"],
        "the kernels run fp32, fp16 and bf16",
    );
    // What the refusal lists is what the kernels accept, a usage error (2).
    let q = common::run("kernels", &["--dtypes", "q8_0"]);
    let stderr = String::from_utf8_lossy(&q.stderr);
    assert_eq!(q.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown dtype 'q8_0': expected fp32, fp16 or bf16")
            && !stderr.contains("tf32"),
        "{stderr}"
    );
    refused("kernels", &["--cases", "huge"], "unknown case 'huge'");
    refused("kernels", &["--ops", "matmul"], "unknown op 'matmul'");
    refused("kernels", &["--ops", "matmul"], "copy, add, matvec");
    refused("kernels", &["--large-mib", "0"], "--large-mib");
    refused(
        "kernels",
        &["--cases", "dram", "--dtypes", "bf16", "--ops", "copy"],
        "the dram case runs at fp32 only",
    );
    let dry = common::run("kernels", &["--dry-run", "--device", "cpu"]);
    assert!(dry.status.success());
    assert!(String::from_utf8_lossy(&dry.stdout).contains("dry run: kernels"));
}

#[test]
fn rms_norm_cpu() {
    rms_norm_on(&Device::Cpu);
}

#[test]
fn softmax_cpu() {
    softmax_on(&Device::Cpu);
}

#[test]
fn elementwise_cpu() {
    elementwise_on(&Device::Cpu);
}

#[test]
fn round_to_cpu() {
    round_to_on(&Device::Cpu);
}

#[test]
fn layouts_cpu() {
    layouts_on(&Device::Cpu);
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
    fn matvec_program_cuda() {
        matvec_program_on("cuda");
    }

    #[test]
    fn rms_norm_cuda() {
        rms_norm_on(&gpu());
    }

    #[test]
    fn softmax_cuda() {
        softmax_on(&gpu());
    }

    #[test]
    fn elementwise_cuda() {
        elementwise_on(&gpu());
    }

    #[test]
    fn round_to_cuda() {
        round_to_on(&gpu());
    }

    #[test]
    fn layouts_cuda() {
        layouts_on(&gpu());
    }

    #[test]
    fn refusals_cuda() {
        refusals_on(&gpu());
    }

    #[test]
    fn program_cuda() {
        program_on("cuda");
    }
}
