//! Non-finite weights found before anything runs: a broken conversion
//! (a NaN scale, an Inf in the embedding) otherwise runs silently, every row
//! "ok" and its answer a token of zeros. Every float tensor is read whole,
//! and every quantized tensor's block scales (the f16 fields each block
//! multiplies its integers by: d, and the minimum or dmin where the type has
//! one), at the offsets ggml's `ggml-common.h` gives them: a scale that is
//! not finite makes every weight of its block NaN or Inf, and a finite scale
//! on integers cannot. Reading the file once costs what loading it costs;
//! the checks are a compare a value.

use std::io::{Read, Seek, SeekFrom};

use anyhow::{bail, Context, Result};
use candle_core::quantized::GgmlDType;
use half::{bf16, f16};

use super::read::Gguf;
use super::type_name;

/// Where a block type's f16 scales lie in each block: (block bytes, offsets).
fn scales(t: GgmlDType) -> Option<(usize, &'static [usize])> {
    Some(match t {
        GgmlDType::Q4_0 => (18, &[0]),
        GgmlDType::Q4_1 => (20, &[0, 2]),
        GgmlDType::Q5_0 => (22, &[0]),
        GgmlDType::Q5_1 => (24, &[0, 2]),
        GgmlDType::Q8_0 => (34, &[0]),
        // scales[16], qs[64], d, dmin
        GgmlDType::Q2K => (84, &[80, 82]),
        // hmask[32], qs[64], scales[12], d
        GgmlDType::Q3K => (110, &[108]),
        // d, dmin, scales[12], qs[128]
        GgmlDType::Q4K => (144, &[0, 2]),
        // d, dmin, scales[12], qh[32], qs[128]
        GgmlDType::Q5K => (176, &[0, 2]),
        // ql[128], qh[64], scales[16], d
        GgmlDType::Q6K => (210, &[208]),
        _ => return None,
    })
}

/// How many values of a tensor of type `t` stored as `raw` are not finite
/// (for a block type: its blocks' scales that are not).
pub fn non_finite(t: GgmlDType, raw: &[u8]) -> usize {
    let f16s = |b: &[u8]| f16::from_le_bytes([b[0], b[1]]);
    match t {
        GgmlDType::F32 => raw
            .chunks_exact(4)
            .filter(|b| !f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite())
            .count(),
        GgmlDType::F16 => raw.chunks_exact(2).filter(|b| !f16s(b).is_finite()).count(),
        GgmlDType::BF16 => raw
            .chunks_exact(2)
            .filter(|b| !bf16::from_le_bytes([b[0], b[1]]).is_finite())
            .count(),
        _ => match scales(t) {
            Some((size, at)) => raw
                .chunks_exact(size)
                .map(|blk| at.iter().filter(|&&o| !f16s(&blk[o..]).is_finite()).count())
                .sum(),
            None => 0,
        },
    }
}

/// Refuses a file any of whose tensors holds a value that is not finite
/// (a float) or a block scale that is not (a block type), naming the first
/// such tensor and how many it holds; `file` is the checked GGUF `g`'s.
pub fn check(file: &mut (impl Read + Seek), g: &Gguf) -> Result<()> {
    let mut raw = Vec::new();
    for t in &g.tensors {
        raw.resize(t.bytes as usize, 0);
        file.seek(SeekFrom::Start(g.data_offset + t.offset))
            .and_then(|_| file.read_exact(&mut raw))
            .with_context(|| format!("cannot read tensor {}", t.name))?;
        let n = non_finite(t.dtype, &raw);
        if n > 0 {
            let what = match scales(t.dtype) {
                Some(_) => "block scales",
                None => "values",
            };
            bail!(
                "tensor {} ({}) holds {n} {what} that are NaN or infinite: a broken conversion, \
                 whose every row would compute nonsense",
                t.name,
                type_name(t.dtype)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QTensor;
    use candle_core::{Device, Tensor};

    /// Each block type's scales where the table says: a finite tensor
    /// quantized has none flagged; the block's first scale set to NaN (or
    /// Inf), one.
    #[test]
    fn every_block_types_scales_are_found_where_ggml_lays_them() {
        let v: Vec<f32> = (0..512).map(|i| ((i as f32) * 0.37).sin()).collect();
        let x = Tensor::from_vec(v, (2, 256), &Device::Cpu).unwrap();
        for t in super::super::READ_TYPES
            .into_iter()
            .filter(|t| t.block_size() > 1)
        {
            let q = QTensor::quantize(&x, t).unwrap();
            let mut raw = q.data().unwrap().to_vec();
            let (size, at) = scales(t).unwrap();
            assert_eq!(size, t.type_size(), "{t:?}");
            assert_eq!(non_finite(t, &raw), 0, "{t:?}");
            for (bad, o) in [(f16::NAN, at[0]), (f16::INFINITY, *at.last().unwrap())] {
                let mut broken = raw.clone();
                broken[size + o..size + o + 2].copy_from_slice(&bad.to_le_bytes());
                assert_eq!(non_finite(t, &broken), 1, "{t:?} at {o}");
                // The broken block dequantizes to non-finite weights: the
                // scale found is one that matters.
                let back = QTensor::new(
                    candle_core::quantized::QStorage::from_data(
                        std::borrow::Cow::Owned(broken),
                        &Device::Cpu,
                        t,
                    )
                    .unwrap(),
                    (2, 256),
                )
                .unwrap();
                let w = back
                    .dequantize(&Device::Cpu)
                    .unwrap()
                    .flatten_all()
                    .unwrap();
                let w = w.to_vec1::<f32>().unwrap();
                assert!(w.iter().any(|x| !x.is_finite()), "{t:?} at {o}");
            }
            raw.truncate(0);
        }
    }

    #[test]
    fn float_tensors_are_read_whole() {
        let f: Vec<u8> = [1.0f32, f32::INFINITY, 2.0, f32::NAN]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(non_finite(GgmlDType::F32, &f), 2);
        let h: Vec<u8> = [f16::ONE, f16::NEG_INFINITY]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(non_finite(GgmlDType::F16, &h), 1);
        let b: Vec<u8> = [bf16::NAN, bf16::ONE]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(non_finite(GgmlDType::BF16, &b), 1);
    }
}
