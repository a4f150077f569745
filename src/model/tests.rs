//! The model layer's models against each other on tiny random models of
//! every architecture: candle-transformers' quantized model (on f32 blocks:
//! nothing rounded) and the suite's decoder on the same weights compute the
//! same logits, in prefill and in decode steps against the cache (a Llama's
//! with its Q and K rows unpermuted: interleaved pairs against halves); the
//! decoder on the suite's kernels computes what it computes on candle-nn's;
//! the lab's quantized path computes candle's quantized model on the same
//! blocks. Gemma 3 is held to candle-transformers' with the MLP gated as
//! candle's model gates it (SiLU, its issue 3745) and within its window.

use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Tensor};

use super::candle::CandleLm;
use super::decoder::Decoder;
use super::layer::Kernels;
use super::quantize::{row_types, Quant};
use super::weights::{tiny, NamedShape, Source, Weights};
use super::{answer, Activation, Arch, Lm};

/// A tiny random model of `arch` (its head tied or not).
pub fn source(arch: Arch, tied: bool) -> Source {
    let mut config = tiny(arch);
    config.tied = tied;
    config.vocab = 160;
    config.context = 64;
    Source::Random {
        shape: NamedShape {
            name: "tiny",
            of: "a tiny model",
            config,
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

fn scale(a: &Tensor) -> f32 {
    let a = a.to_dtype(DType::F32).unwrap();
    let m = a.abs().unwrap().flatten_all().unwrap().max(0).unwrap();
    m.to_scalar::<f32>().unwrap()
}

/// The suite's decoder of `source` in f32 with `kernels`, gated as candle's
/// model of its architecture gates it.
fn decoder(source: &Source, kernels: Kernels, dev: &Device) -> Decoder {
    let w = Weights::uncached(source);
    let d = Decoder::load(&w, DType::F32, dev, 32, kernels).unwrap();
    as_candle(d, source)
}

fn as_candle(d: Decoder, source: &Source) -> Decoder {
    match source.config().arch {
        Arch::Gemma3 => d.with_activation(Activation::Silu),
        _ => d,
    }
}

/// `a` and `b` give the same logits (within `tol` of their scale) on a
/// prompt and the decode steps after it (the positions within tiny
/// Gemma 3's window of 8), and the same greedy answer.
fn same_model(a: &mut dyn Lm, b: &mut dyn Lm, tol: f32, what: &str) {
    let prompt = [3u32, 17, 99, 5, 42];
    let (x, y) = (
        a.forward(&prompt, 0).unwrap(),
        b.forward(&prompt, 0).unwrap(),
    );
    assert_eq!(x.dims(), [1, 160], "{what}");
    assert_eq!(y.dims(), [1, 160], "{what}");
    let s = scale(&x);
    assert!(
        max_diff(&x, &y) < tol * s,
        "{what} prefill: {} of {s}",
        max_diff(&x, &y)
    );
    for (i, tok) in [7u32, 8, 150].iter().enumerate() {
        let (x, y) = (
            a.forward(&[*tok], 5 + i).unwrap(),
            b.forward(&[*tok], 5 + i).unwrap(),
        );
        let d = max_diff(&x, &y);
        assert!(d < tol * s, "{what} decode {i}: {d} of {s}");
    }
    // A new sequence starts over (position 0 empties the cache).
    let (x, y) = (
        a.forward(&prompt, 0).unwrap(),
        b.forward(&prompt, 0).unwrap(),
    );
    assert!(max_diff(&x, &y) < tol * s, "{what} again");
    let (p, _) = answer(a, &prompt, 3, &[]).unwrap();
    let (q, _) = answer(b, &prompt, 3, &[]).unwrap();
    assert_eq!(p, q, "{what}");
}

#[test]
fn the_decoder_computes_what_candles_model_of_each_architecture_computes() {
    for arch in Arch::ALL {
        for tied in [true, false] {
            let source = source(arch, tied);
            let dev = Device::Cpu;
            let w = Weights::uncached(&source);
            let mut candle = CandleLm::load(&w, Quant::Type(GgmlDType::F32), &dev).unwrap();
            let mut ours = decoder(&source, Kernels::Fused, &dev);
            // Qwen 3's rotary tables are f16 in candle's model (the metadata's
            // general.dtype, absent): its positions' angles round there.
            let tol = if arch == Arch::Qwen3 { 2e-2 } else { 1e-4 };
            same_model(
                &mut candle,
                &mut ours,
                tol,
                &format!("{arch:?} tied {tied}"),
            );
        }
    }
}

#[test]
fn requantized_rows_run_and_stay_close_to_f32() {
    let source = source(Arch::Llama, true);
    let dev = Device::Cpu;
    let w = Weights::uncached(&source);
    let mut f32 = CandleLm::load(&w, Quant::Type(GgmlDType::F32), &dev).unwrap();
    let mut q8 = CandleLm::load(&w, Quant::Type(GgmlDType::Q8_0), &dev).unwrap();
    let prompt = [3u32, 17, 99, 5, 42];
    let (a, b) = (
        f32.forward(&prompt, 0).unwrap(),
        q8.forward(&prompt, 0).unwrap(),
    );
    let s = scale(&a);
    assert!(max_diff(&a, &b) < 0.05 * s, "{} of {s}", max_diff(&a, &b));
}

/// The suite's kernels (`--kernels lab`) compute the model candle-nn's do,
/// for every architecture, at f32.
fn lab_kernels_compute_the_same_model(dev: &Device) {
    for arch in Arch::ALL {
        let source = source(arch, true);
        let mut fused = decoder(&source, Kernels::Fused, dev);
        let mut lab = decoder(&source, Kernels::Lab, dev);
        same_model(&mut fused, &mut lab, 1e-4, &format!("{arch:?}"));
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

/// The lab's quantized path (the decoder's layers on the GGUF blocks as
/// stored, the suite's quantized kernels) computes the model candle's
/// quantized model does on the same blocks: both quantize the activations to
/// the same 8-bit blocks (Q4_1's sums rounded as Q8_1 stores them), so their
/// logits differ by the order of f32 sums alone (measured: 5e-7 of a scale
/// of 3), held here to 0.2% of the logits' scale, in prefill and in decode
/// steps, and their greedy answers are the same.
fn lab_quantized_path_computes_candles_model(dev: &Device) {
    let cases = [
        (Arch::Llama, GgmlDType::Q8_0, false),
        (Arch::Llama, GgmlDType::Q4_1, true),
        (Arch::Llama, GgmlDType::Q4_0, false),
        (Arch::Qwen2, GgmlDType::Q8_0, true),
        (Arch::Gemma3, GgmlDType::Q4_0, true),
    ];
    for (arch, t, tied) in cases {
        let source = source(arch, tied);
        let types = row_types(&source, Quant::Type(t)).unwrap();
        let weights = Weights::uncached(&source);
        let mut candle = CandleLm::load(&weights, Quant::Type(t), dev).unwrap();
        let lab = Decoder::load_quantized(&weights, &types, dev, 32).unwrap();
        let mut lab = as_candle(lab, &source);
        same_model(&mut candle, &mut lab, 2e-3, &format!("{arch:?} {t:?}"));
    }
}

#[test]
fn lab_quantized_path_computes_candles_model_on_cpu() {
    lab_quantized_path_computes_candles_model(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn lab_quantized_path_computes_candles_model_on_cuda() {
    lab_quantized_path_computes_candles_model(&Device::new_cuda(0).unwrap());
}

/// Moving Q's and K's rows back on the blocks gives what moving the
/// dequantized rows gives, exactly.
#[test]
fn unpermuting_blocks_moves_rows_as_unpermute_does() {
    use candle_core::quantized::QTensor;
    let w = super::weights::random("w", &[24, 64], 5).unwrap();
    for t in [GgmlDType::Q4_1, GgmlDType::Q8_0] {
        let q = QTensor::quantize(&w, t).unwrap();
        let moved = super::decoder::unpermute_blocks(&q, 3).unwrap();
        let a = moved.dequantize(&Device::Cpu).unwrap();
        let b = super::decoder::unpermute(&q.dequantize(&Device::Cpu).unwrap(), 3).unwrap();
        assert_eq!(max_diff(&a, &b), 0.0, "{t:?}");
        assert_ne!(
            max_diff(&a, &q.dequantize(&Device::Cpu).unwrap()),
            0.0,
            "{t:?}: the rows did move"
        );
    }
}

/// Gemma 3's sliding window past its end (tiny: 8 keys, layer 6 global): a
/// prompt of 13 tokens in one pass (the window's mask) gives the logits that
/// feeding it a token at a time gives (each step's keys narrowed to the
/// window), on candle-nn's kernels and on the suite's; and the window
/// matters (all layers global give other logits).
#[test]
fn a_sliding_window_masks_a_prompt_as_it_narrows_a_step() {
    let source = source(Arch::Gemma3, true);
    let prompt: Vec<u32> = (0..13).map(|i| (i * 37 + 5) % 160).collect();
    for kernels in [Kernels::Fused, Kernels::Lab] {
        let mut d = decoder(&source, kernels, &Device::Cpu);
        let whole = d.forward(&prompt, 0).unwrap();
        let mut step = d.forward(&prompt[..1], 0).unwrap();
        for (i, t) in prompt.iter().enumerate().skip(1) {
            step = d.forward(&[*t], i).unwrap();
        }
        let s = scale(&whole);
        let diff = max_diff(&whole, &step);
        assert!(diff < 1e-4 * s, "{kernels:?}: {diff} of {s}");
        let Source::Random { shape, seed } = &source else {
            unreachable!()
        };
        let mut global = shape.config.clone();
        global.local = None;
        let all = Source::Random {
            shape: NamedShape {
                config: global,
                ..*shape
            },
            seed: *seed,
        };
        let other = decoder(&all, kernels, &Device::Cpu)
            .forward(&prompt, 0)
            .unwrap();
        assert!(
            max_diff(&whole, &other) > 1e-3 * s,
            "{kernels:?}: the window changes nothing"
        );
    }
}

/// Each sequence of a batch (distinct prompts of one length, decoded in
/// lockstep) gets the logits it gets decoded alone, and so the same greedy
/// tokens: on candle's model, the decoder on both kernel sets, and the
/// lab's quantized path, for every architecture (a tiny Gemma 3's window
/// of 8 passed by the steps).
fn a_batch_decodes_each_sequence_as_alone(dev: &Device) {
    let prompts = [
        vec![3u32, 17, 99, 5, 42],
        vec![11, 12, 13, 14, 15],
        vec![150, 2, 77, 64, 9],
    ];
    for arch in Arch::ALL {
        let source = source(arch, arch != Arch::Llama);
        let w = Weights::uncached(&source);
        let types = row_types(&source, Quant::Type(GgmlDType::Q8_0)).unwrap();
        let models: Vec<(&str, Box<dyn Lm>)> = vec![
            (
                "candle",
                Box::new(CandleLm::load(&w, Quant::Type(GgmlDType::F32), dev).unwrap()),
            ),
            ("fused", Box::new(decoder(&source, Kernels::Fused, dev))),
            ("lab", Box::new(decoder(&source, Kernels::Lab, dev))),
            (
                "lab q8_0",
                Box::new(Decoder::load_quantized(&w, &types, dev, 32).unwrap()),
            ),
        ];
        for (name, mut lm) in models {
            let what = format!("{arch:?} {name}");
            if arch == Arch::Qwen3 && name == "candle" && dev.is_cpu() {
                let e = lm.forward_batch(&prompts, 0).unwrap_err().to_string();
                assert!(e.contains("one sequence at a time"), "{e}");
                continue;
            }
            // Alone: each prompt, then 5 greedy steps.
            let mut alone = Vec::new();
            for p in &prompts {
                let mut logits = vec![lm.forward(p, 0).unwrap()];
                let mut next = super::pick(&logits[0]).unwrap();
                for i in 0..5 {
                    logits.push(lm.forward(&[next], p.len() + i).unwrap());
                    next = super::pick(logits.last().unwrap()).unwrap();
                }
                alone.push(logits);
            }
            // Together: the prompts as one batch, then 5 steps of three tokens.
            let mut x = lm.forward_batch(&prompts, 0).unwrap();
            assert_eq!(x.dims(), [3, 160], "{what}");
            for step in 0..6 {
                for (s, logits) in alone.iter().enumerate() {
                    let one = x.narrow(0, s, 1).unwrap();
                    let tol = 1e-4 * scale(&logits[step]).max(1.0);
                    let d = max_diff(&one, &logits[step]);
                    assert!(d < tol, "{what} step {step} sequence {s}: {d}");
                }
                if step < 5 {
                    let next: Vec<Vec<u32>> = super::pick_all(&x)
                        .unwrap()
                        .into_iter()
                        .map(|t| vec![t])
                        .collect();
                    x = lm.forward_batch(&next, 5 + step).unwrap();
                }
            }
            // And a single sequence again after the batch.
            let again = lm.forward(&prompts[1], 0).unwrap();
            assert!(
                max_diff(&again, &alone[1][0]) < 1e-4 * scale(&again),
                "{what}"
            );
        }
    }
}

#[test]
fn a_batch_decodes_each_sequence_as_alone_on_cpu() {
    a_batch_decodes_each_sequence_as_alone(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn a_batch_decodes_each_sequence_as_alone_on_cuda() {
    a_batch_decodes_each_sequence_as_alone(&Device::new_cuda(0).unwrap());
}
