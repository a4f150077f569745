//! The two paths against each other on a tiny random model: quantized_llama
//! over f32 blocks (interleaved rotary on GGUF's layout) and block's layers
//! on the same weights unpermuted (halves) compute the same logits, in
//! prefill and in decode steps against the cache.

use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};

use super::float::FloatLm;
use super::measure::answer;
use super::quantized::QuantizedLm;
use super::weights::{NamedShape, Source, Weights};
use super::{Dims, Lm};
use crate::bench::block::model::Kernels;

pub fn tiny(tied: bool) -> Source {
    Source::Random {
        shape: NamedShape {
            name: "tiny",
            of: "a tiny Llama",
            dims: Dims {
                layers: 2,
                hidden: 64,
                heads: 4,
                kv_heads: 2,
                head_dim: 16,
                mlp: 128,
                vocab: 160,
                context: 64,
                rope_theta: 10_000.0,
                rms_eps: 1e-5,
                tied,
            },
        },
        seed: 3,
    }
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
    let b = b.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

#[test]
fn the_float_path_computes_what_quantized_llama_computes() {
    for tied in [true, false] {
        let source = tiny(tied);
        let dev = Device::Cpu;
        let mut q = QuantizedLm::load(&Weights::uncached(&source), GgmlDType::F32, &dev).unwrap();
        let mut f = FloatLm::load(
            &Weights::uncached(&source),
            DType::F32,
            &dev,
            32,
            Kernels::Fused,
        )
        .unwrap();
        let prompt = [3u32, 17, 99, 5, 42];
        let (lq, lf) = (
            q.forward(&prompt, 0).unwrap(),
            f.forward(&prompt, 0).unwrap(),
        );
        assert_eq!(lq.dims(), [1, 160]);
        assert_eq!(lf.dims(), [1, 160]);
        assert!(max_diff(&lq, &lf) < 1e-4, "prefill: {}", max_diff(&lq, &lf));
        for (i, tok) in [7u32, 8, 9].iter().enumerate() {
            let (lq, lf) = (
                q.forward(&[*tok], 5 + i).unwrap(),
                f.forward(&[*tok], 5 + i).unwrap(),
            );
            assert!(
                max_diff(&lq, &lf) < 1e-4,
                "decode {i}: {}",
                max_diff(&lq, &lf)
            );
        }
        // A new sequence starts over (position 0 empties the cache).
        let again = f.forward(&prompt, 0).unwrap();
        assert!(max_diff(&again, &q.forward(&prompt, 0).unwrap()) < 1e-4);
        let (a, _) = answer(&mut q, &prompt, 6, &[]).unwrap();
        let (b, _) = answer(&mut f, &prompt, 6, &[]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 6);
    }
}

#[test]
fn requantized_rows_run_and_stay_close_to_f32() {
    let source = tiny(true);
    let dev = Device::Cpu;
    let mut f32 = QuantizedLm::load(&Weights::uncached(&source), GgmlDType::F32, &dev).unwrap();
    let mut q8 = QuantizedLm::load(&Weights::uncached(&source), GgmlDType::Q8_0, &dev).unwrap();
    let prompt = [3u32, 17, 99, 5, 42];
    let (a, b) = (
        f32.forward(&prompt, 0).unwrap(),
        q8.forward(&prompt, 0).unwrap(),
    );
    let scale = a
        .abs()
        .unwrap()
        .max(1)
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(
        max_diff(&a, &b) < 0.05 * scale,
        "{} of {scale}",
        max_diff(&a, &b)
    );
}

/// The suite's kernels (`--kernels lab`) compute the model candle-nn's do:
/// the same logits in prefill and in decode steps against the cache, at f32.
fn lab_kernels_compute_the_same_model(dev: &Device) {
    let source = tiny(true);
    let mut fused = FloatLm::load(
        &Weights::uncached(&source),
        DType::F32,
        dev,
        32,
        Kernels::Fused,
    )
    .unwrap();
    let mut lab = FloatLm::load(
        &Weights::uncached(&source),
        DType::F32,
        dev,
        32,
        Kernels::Lab,
    )
    .unwrap();
    let prompt = [3u32, 17, 99, 5, 42];
    let (a, b) = (
        fused.forward(&prompt, 0).unwrap(),
        lab.forward(&prompt, 0).unwrap(),
    );
    assert!(max_diff(&a, &b) < 1e-4, "prefill: {}", max_diff(&a, &b));
    for (i, tok) in [7u32, 8].iter().enumerate() {
        let (a, b) = (
            fused.forward(&[*tok], 5 + i).unwrap(),
            lab.forward(&[*tok], 5 + i).unwrap(),
        );
        assert!(max_diff(&a, &b) < 1e-4, "decode {i}: {}", max_diff(&a, &b));
    }
}

#[test]
fn lab_kernels_compute_the_same_model_on_cpu() {
    lab_kernels_compute_the_same_model(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn lab_kernels_compute_the_same_model_on_cuda() {
    lab_kernels_compute_the_same_model(&Device::new_cuda(0).unwrap());
}

#[test]
fn the_shape_names_are_the_shapes() {
    let names: Vec<&str> = super::weights::shapes().iter().map(|s| s.name).collect();
    assert_eq!(names, super::weights::SHAPE_NAMES);
}

/// The lab's quantized path (block's layers on the GGUF blocks as stored,
/// the suite's quantized kernels) computes the model quantized_llama does on
/// the same blocks: both quantize the activations to the same 8-bit blocks
/// (Q4_1's sums rounded as Q8_1 stores them), so their logits differ by the
/// order of f32 sums alone (measured: 5e-7 of a scale of 3), held here to
/// 0.2% of the logits' scale, in prefill and in decode steps, and their
/// greedy answers are the same.
fn lab_quantized_path_computes_quantized_llamas_model(dev: &Device) {
    for (t, tied) in [
        (GgmlDType::Q8_0, false),
        (GgmlDType::Q4_1, true),
        (GgmlDType::Q4_0, false),
    ] {
        let source = tiny(tied);
        let types = super::quantized::row_types(&source, t).unwrap();
        let weights = Weights::uncached(&source);
        let mut candle = QuantizedLm::load(&weights, t, dev).unwrap();
        let mut lab = FloatLm::load_quantized(&weights, &types, dev, 32).unwrap();
        let prompt = [3u32, 17, 99, 5, 42, 7, 1];
        let (a, b) = (
            candle.forward(&prompt, 0).unwrap(),
            lab.forward(&prompt, 0).unwrap(),
        );
        let scale = a.abs().unwrap().max(1).unwrap().max(0).unwrap();
        let scale = scale.to_scalar::<f32>().unwrap();
        let d = max_diff(&a, &b);
        assert!(d < 2e-3 * scale, "{t:?} prefill: {d} of {scale}");
        for (i, tok) in [7u32, 8, 150].iter().enumerate() {
            let (a, b) = (
                candle.forward(&[*tok], 7 + i).unwrap(),
                lab.forward(&[*tok], 7 + i).unwrap(),
            );
            let d = max_diff(&a, &b);
            assert!(d < 2e-3 * scale, "{t:?} decode {i}: {d} of {scale}");
        }
        let (x, _) = answer(&mut candle, &prompt, 6, &[]).unwrap();
        let (y, _) = answer(&mut lab, &prompt, 6, &[]).unwrap();
        assert_eq!(x, y, "{t:?}");
    }
}

#[test]
fn lab_quantized_path_computes_quantized_llamas_model_on_cpu() {
    lab_quantized_path_computes_quantized_llamas_model(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn lab_quantized_path_computes_quantized_llamas_model_on_cuda() {
    lab_quantized_path_computes_quantized_llamas_model(&Device::new_cuda(0).unwrap());
}

/// Moving Q's and K's rows back on the blocks gives what moving the
/// dequantized rows gives, exactly.
#[test]
fn unpermuting_blocks_moves_rows_as_unpermute_does() {
    use candle_core::quantized::QTensor;
    let w = super::weights::random("w", &[24, 64], 5).unwrap();
    for t in [GgmlDType::Q4_1, GgmlDType::Q8_0] {
        let q = QTensor::quantize(&w, t).unwrap();
        let moved = super::float::unpermute_blocks(&q, 3).unwrap();
        let a = moved.dequantize(&Device::Cpu).unwrap();
        let b = super::float::unpermute(&q.dequantize(&Device::Cpu).unwrap(), 3).unwrap();
        assert_eq!(max_diff(&a, &b), 0.0, "{t:?}");
        assert_ne!(
            max_diff(&a, &q.dequantize(&Device::Cpu).unwrap()),
            0.0,
            "{t:?}: the rows did move"
        );
    }
}
