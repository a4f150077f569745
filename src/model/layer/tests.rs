//! The layer against references it does not share code with: grouped-query
//! attention against multi-head attention with each key/value head's weights
//! repeated for its group (what GQA is, by definition: Ainslie et al. 2023),
//! a decode step against a preallocated cache against the last token of a
//! prefill one token longer, and the fused kernels (candle-nn's and the
//! suite's own) against the composed ones.
//! The device-generic bodies run on the CPU here and on CUDA with the feature.

use std::collections::HashMap;

use candle_core::{DType, Device, IndexOp, Tensor};

use super::*;

fn config(heads: usize, kv_heads: usize) -> Config {
    Config {
        arch: crate::model::Arch::Llama,
        layers: 1,
        hidden: 32,
        heads,
        kv_heads,
        head_dim: 32 / heads,
        mlp: 40,
        vocab: 0,
        context: 64,
        rms_eps: 1e-6,
        rope_theta: 500_000.0,
        tied: true,
        local: None,
    }
}

/// Uniform samples in [-1, 1) of `shape` from `seed`, f64 on the host.
fn uniform(shape: &[usize], seed: u64) -> Tensor {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// Random weights for `cfg` on the host in f64, scaled by 1/sqrt(fan-in).
fn weights(cfg: &Config, seed: u64) -> HashMap<&'static str, Tensor> {
    cfg.layer_weights()
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let t = uniform(&shape, seed * 100 + i as u64);
            let t = if shape.len() == 1 {
                ((t * 0.1).unwrap() + 1.0).unwrap()
            } else {
                (t / (shape[1] as f64).sqrt()).unwrap()
            };
            (name, t)
        })
        .collect()
}

fn layer(cfg: &Config, w: &HashMap<&str, Tensor>, dtype: DType, device: &Device) -> Layer {
    Layer::new(cfg, 0, |n| Ok(w[n].to_dtype(dtype)?.to_device(device)?)).unwrap()
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    let a = a
        .to_dtype(DType::F64)
        .unwrap()
        .to_device(&Device::Cpu)
        .unwrap();
    let b = b
        .to_dtype(DType::F64)
        .unwrap()
        .to_device(&Device::Cpu)
        .unwrap();
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
}

/// A prefill of `x` (batch, t, hidden) at positions 0..t, no cache.
fn prefill(l: &Layer, x: &Tensor, k: Kernels) -> Tensor {
    let c = l.config();
    let (t, dtype, device) = (x.dim(1).unwrap(), x.dtype(), x.device());
    let rope = Rope::new(c.head_dim, c.rope_theta, 0, t, dtype, device).unwrap();
    let mask = causal_mask(t, 0, dtype, device).unwrap();
    l.forward(x, &rope, Some(&mask), None, k).unwrap()
}

#[test]
fn grouped_query_attention_is_multi_head_attention_with_shared_key_value_heads() {
    let gqa = config(4, 2);
    let w = weights(&gqa, 7);
    // The same layer as multi-head attention: query head i reads key/value
    // head i / groups, so K and V's rows are each KV head's, repeated.
    let mha = config(4, 4);
    let d = gqa.head_dim;
    let repeat = |t: &Tensor| -> Tensor {
        let heads: Vec<Tensor> = (0..gqa.heads)
            .map(|i| t.narrow(0, (i / gqa.groups()) * d, d).unwrap())
            .collect();
        Tensor::cat(&heads, 0).unwrap()
    };
    let mut wm = w.clone();
    wm.insert("wk", repeat(&w["wk"]));
    wm.insert("wv", repeat(&w["wv"]));
    let cpu = Device::Cpu;
    let x = uniform(&[2, 5, 32], 1);
    let grouped = prefill(&layer(&gqa, &w, DType::F64, &cpu), &x, Kernels::Composed);
    let plain = prefill(&layer(&mha, &wm, DType::F64, &cpu), &x, Kernels::Composed);
    assert!(max_diff(&grouped, &plain) < 1e-12);
    // And it is not the layer with K and V's heads in another order.
    let swapped = Tensor::cat(
        &[
            w["wk"].narrow(0, d, d).unwrap(),
            w["wk"].narrow(0, 0, d).unwrap(),
        ],
        0,
    )
    .unwrap();
    let mut ws = w.clone();
    ws.insert("wk", swapped);
    let other = prefill(&layer(&gqa, &ws, DType::F64, &cpu), &x, Kernels::Composed);
    assert!(max_diff(&grouped, &other) > 1e-3);
}

/// A prefill into a cache with room to spare (its views strided), then one
/// decode step against it, equals the last token of a prefill one longer.
fn decode_is_the_last_token_of_a_longer_prefill(device: &Device) {
    let cfg = config(4, 2);
    let w = weights(&cfg, 3);
    let l = layer(&cfg, &w, DType::F32, device);
    let (b, t) = (2, 6);
    let x = uniform(&[b, t + 1, 32], 2)
        .to_dtype(DType::F32)
        .unwrap()
        .to_device(device)
        .unwrap();
    let full = prefill(&l, &x, Kernels::Fused);
    let mut cache = KvCache::new(b, cfg.kv_heads, t + 3, cfg.head_dim, DType::F32, device).unwrap();
    let rope = Rope::new(cfg.head_dim, cfg.rope_theta, 0, t, DType::F32, device).unwrap();
    let mask = causal_mask(t, 0, DType::F32, device).unwrap();
    let head = x.narrow(1, 0, t).unwrap();
    let first = l
        .forward(&head, &rope, Some(&mask), Some(&mut cache), Kernels::Fused)
        .unwrap();
    assert_eq!(cache.len(), t);
    assert!(max_diff(&first, &full.narrow(1, 0, t).unwrap()) < 1e-5);
    let rope = Rope::new(cfg.head_dim, cfg.rope_theta, t, 1, DType::F32, device).unwrap();
    let last = x.narrow(1, t, 1).unwrap();
    let step = l
        .forward(&last, &rope, None, Some(&mut cache), Kernels::Fused)
        .unwrap();
    assert_eq!((cache.len(), cache.capacity()), (t + 1, t + 3));
    assert!(max_diff(&step, &full.i((.., t..t + 1, ..)).unwrap()) < 1e-5);
    // Rewound, the same step gives the same token.
    cache.truncate(t);
    let again = l
        .forward(&last, &rope, None, Some(&mut cache), Kernels::Fused)
        .unwrap();
    assert_eq!(max_diff(&step, &again), 0.0);
}

#[test]
fn decode_is_the_last_token_of_a_longer_prefill_cpu() {
    decode_is_the_last_token_of_a_longer_prefill(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn decode_is_the_last_token_of_a_longer_prefill_cuda() {
    decode_is_the_last_token_of_a_longer_prefill(&Device::new_cuda(0).unwrap());
}

fn fused_kernels_compute_the_composed_math(device: &Device) {
    for (heads, kv_heads) in [(4, 4), (4, 1)] {
        let cfg = config(heads, kv_heads);
        let l = layer(&cfg, &weights(&cfg, 11), DType::F32, device);
        let x = uniform(&[1, 7, 32], 3)
            .to_dtype(DType::F32)
            .unwrap()
            .to_device(device)
            .unwrap();
        let diff = max_diff(
            &prefill(&l, &x, Kernels::Fused),
            &prefill(&l, &x, Kernels::Composed),
        );
        assert!(diff < 1e-4, "{heads}/{kv_heads}: {diff}");
    }
}

/// `--kernels lab` computes what `--kernels candle` does: a prefill and a
/// decode step against the cache, in f32 and bf16 (one rounding of the
/// layer's output, ~2^-8 of values of order 1, plus bf16 rounding inside).
fn lab_kernels_compute_what_candles_do(device: &Device) {
    let cfg = config(4, 2);
    let w = weights(&cfg, 5);
    for (dtype, bound) in [(DType::F32, 1e-5), (DType::BF16, 0.1)] {
        let l = layer(&cfg, &w, dtype, device);
        let (b, t) = (2, 9);
        let x = uniform(&[b, t + 1, 32], 4)
            .to_dtype(dtype)
            .unwrap()
            .to_device(device)
            .unwrap();
        let diff = max_diff(
            &prefill(&l, &x, Kernels::Lab),
            &prefill(&l, &x, Kernels::Fused),
        );
        assert!(diff < bound, "prefill {dtype:?}: {diff}");
        let step = |k: Kernels| {
            let mut cache =
                KvCache::new(b, cfg.kv_heads, t + 1, cfg.head_dim, dtype, device).unwrap();
            let rope = Rope::new(cfg.head_dim, cfg.rope_theta, 0, t, dtype, device).unwrap();
            let mask = causal_mask(t, 0, dtype, device).unwrap();
            let head = x.narrow(1, 0, t).unwrap();
            l.forward(&head, &rope, Some(&mask), Some(&mut cache), k)
                .unwrap();
            let rope = Rope::new(cfg.head_dim, cfg.rope_theta, t, 1, dtype, device).unwrap();
            let last = x.narrow(1, t, 1).unwrap();
            l.forward(&last, &rope, None, Some(&mut cache), k).unwrap()
        };
        let diff = max_diff(&step(Kernels::Lab), &step(Kernels::Fused));
        assert!(diff < bound, "decode {dtype:?}: {diff}");
    }
}

/// An f32 layer over a 16-bit cache (f16, bf16): the suite's op, which
/// reads the cache as it lies, and candle's path, which widens it first,
/// compute the same step; and it is the f32 cache's step within the
/// cache's rounding, not equal to it (the keys and values were rounded).
fn a_sixteen_bit_cache_is_the_f32_step_within_its_rounding(device: &Device) {
    let cfg = config(4, 2);
    let l = layer(&cfg, &weights(&cfg, 7), DType::F32, device);
    let (b, t) = (2, 9);
    let x = uniform(&[b, t + 1, 32], 6)
        .to_device(device)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    let step = |k: Kernels, kv: DType| {
        let mut cache = KvCache::new(b, cfg.kv_heads, t + 1, cfg.head_dim, kv, device).unwrap();
        let rope = Rope::new(cfg.head_dim, cfg.rope_theta, 0, t, DType::F32, device).unwrap();
        let mask = causal_mask(t, 0, DType::F32, device).unwrap();
        l.forward(
            &x.narrow(1, 0, t).unwrap(),
            &rope,
            Some(&mask),
            Some(&mut cache),
            k,
        )
        .unwrap();
        assert_eq!(cache.dtype(), kv);
        let rope = Rope::new(cfg.head_dim, cfg.rope_theta, t, 1, DType::F32, device).unwrap();
        let last = x.narrow(1, t, 1).unwrap();
        l.forward(&last, &rope, None, Some(&mut cache), k).unwrap()
    };
    let f32_cache = step(Kernels::Lab, DType::F32);
    for (kv, bound) in [(DType::F16, 1e-2), (DType::BF16, 5e-2)] {
        let lab = step(Kernels::Lab, kv);
        assert_eq!(lab.dtype(), DType::F32);
        let diff = max_diff(&lab, &step(Kernels::Fused, kv));
        assert!(diff < 1e-5, "{kv:?}: lab against candle's {diff}");
        let rounding = max_diff(&lab, &f32_cache);
        assert!(
            rounding > 0.0 && rounding < bound,
            "{kv:?}: against f32's {rounding}"
        );
    }
}

#[test]
fn a_sixteen_bit_cache_is_the_f32_step_within_its_rounding_cpu() {
    a_sixteen_bit_cache_is_the_f32_step_within_its_rounding(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn a_sixteen_bit_cache_is_the_f32_step_within_its_rounding_cuda() {
    a_sixteen_bit_cache_is_the_f32_step_within_its_rounding(&Device::new_cuda(0).unwrap());
}

#[test]
fn lab_kernels_compute_what_candles_do_cpu() {
    lab_kernels_compute_what_candles_do(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn lab_kernels_compute_what_candles_do_cuda() {
    lab_kernels_compute_what_candles_do(&Device::new_cuda(0).unwrap());
}

#[test]
fn fused_kernels_compute_the_composed_math_cpu() {
    fused_kernels_compute_the_composed_math(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn fused_kernels_compute_the_composed_math_cuda() {
    fused_kernels_compute_the_composed_math(&Device::new_cuda(0).unwrap());
}

#[test]
fn the_cache_writes_in_place_and_refuses_what_does_not_fit() {
    let cpu = Device::Cpu;
    let mut cache = KvCache::new(1, 2, 3, 4, DType::F32, &cpu).unwrap();
    assert!(cache.is_empty());
    let a = Tensor::ones((1, 2, 2, 4), DType::F32, &cpu).unwrap();
    let (k, _) = cache
        .append(&a, &(&a * 2.0).unwrap(), Kernels::Fused)
        .unwrap();
    assert_eq!(k.dims(), [1, 2, 2, 4]);
    let b = (&a.narrow(2, 0, 1).unwrap() * 3.0).unwrap();
    let (k, v) = cache.append(&b, &b, Kernels::Fused).unwrap();
    // Both appends are there, the first untouched by the second.
    let row = |t: &Tensor, p: usize| t.i((0, 1, p, 0)).unwrap().to_scalar::<f32>().unwrap();
    assert_eq!((row(&k, 0), row(&k, 1), row(&k, 2)), (1.0, 1.0, 3.0));
    assert_eq!((row(&v, 0), row(&v, 2)), (2.0, 3.0));
    let err = cache
        .append(&b, &b, Kernels::Fused)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("holds 3 positions: 1 more do not fit after 3"),
        "{err}"
    );
    cache.truncate(1);
    let (k, _) = cache.append(&b, &b, Kernels::Fused).unwrap();
    assert_eq!((k.dim(2).unwrap(), row(&k, 1)), (2, 3.0));
}

#[test]
fn shapes_the_layer_cannot_have_are_refused() {
    let err = check(&config(4, 3)).unwrap_err().to_string();
    assert!(err.contains("kv_heads 3 must divide heads 4"), "{err}");
    let cfg = config(4, 2);
    let mut w = weights(&cfg, 1);
    w.insert(
        "wk",
        Tensor::zeros((32, 32), DType::F64, &Device::Cpu).unwrap(),
    );
    let err = Layer::new(&cfg, 0, |n| Ok(w[n].clone()))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("weight wk has shape [32, 32], the layer needs [16, 32]"),
        "{err}"
    );
}
