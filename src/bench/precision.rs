//! The limits of each float format Candle computes in: f64, f32, f16, bf16 and
//! f8e4m3. Each limit is derived from the format's bit layout (sign, exponent
//! bits, mantissa bits) by a pure function, and checked against the constants
//! that Rust, the `half` crate and Candle's f8 type (the `float8` crate) ship.
//! The layout values are what `torch.finfo` reports. Then the `precision`
//! experiment's demonstrations: what those limits do to real numbers, on Candle
//! tensors converted on the selected device.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

use crate::schema::{
    Accumulation, FormatLimits, JsonF64, Limits, PointOne, PrecisionResults as Precision, RoundTrip,
};

/// A binary floating-point format: 1 sign bit, `exponent_bits`, `mantissa_bits`
/// (stored fraction bits; the leading 1 of a normal number is implicit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    pub name: &'static str,
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    /// IEEE 754 reserves the all-ones exponent for inf/NaN. OCP FP8 E4M3 (the
    /// `e4m3fn` of PyTorch and CUDA) has no infinity: only S.1111.111 is NaN,
    /// so the all-ones exponent holds finite numbers up to 1.75 x 2^8 = 448.
    pub has_infinity: bool,
}

/// The formats, widest first.
pub const FORMATS: [Format; 5] = [
    Format {
        name: "f64",
        exponent_bits: 11,
        mantissa_bits: 52,
        has_infinity: true,
    },
    Format {
        name: "f32",
        exponent_bits: 8,
        mantissa_bits: 23,
        has_infinity: true,
    },
    Format {
        name: "f16",
        exponent_bits: 5,
        mantissa_bits: 10,
        has_infinity: true,
    },
    Format {
        name: "bf16",
        exponent_bits: 8,
        mantissa_bits: 7,
        has_infinity: true,
    },
    Format {
        name: "f8e4m3",
        exponent_bits: 4,
        mantissa_bits: 3,
        has_infinity: false,
    },
];

impl Format {
    pub fn bits(&self) -> u32 {
        1 + self.exponent_bits + self.mantissa_bits
    }

    /// Limits from the bit layout alone. With bias b = 2^(e-1) - 1 and m
    /// mantissa bits: eps = 2^-m, smallest normal = 2^(1-b), smallest
    /// subnormal = 2^(1-b-m); max = (2 - 2^-m) 2^b under IEEE rules, and
    /// (2 - 2^(1-m)) 2^(b+1) without infinity (all-ones mantissa is NaN).
    pub fn limits(&self) -> Limits {
        let (e, m) = (self.exponent_bits as i32, self.mantissa_bits as i32);
        let bias = (1 << (e - 1)) - 1;
        let max = if self.has_infinity {
            (2.0 - pow2(-m)) * pow2(bias)
        } else {
            (2.0 - pow2(1 - m)) * pow2(bias + 1)
        };
        Limits {
            bits: self.bits(),
            exponent_bits: self.exponent_bits,
            mantissa_bits: self.mantissa_bits,
            max,
            smallest_normal: pow2(1 - bias),
            smallest_subnormal: pow2(1 - bias - m),
            eps: pow2(-m),
            decimal_digits: (f64::from(self.mantissa_bits) * std::f64::consts::LOG10_2).floor()
                as u32,
        }
    }

    /// The same limits as the Rust types' own constants state them
    /// (std for f64/f32, `half` for f16/bf16, `float8` for f8e4m3).
    pub fn crate_limits(&self) -> Limits {
        use float8::F8E4M3;
        use half::{bf16, f16};
        let (max, normal, subnormal, eps) = match self.name {
            "f64" => (f64::MAX, f64::MIN_POSITIVE, f64::from_bits(1), f64::EPSILON),
            "f32" => (
                f64::from(f32::MAX),
                f64::from(f32::MIN_POSITIVE),
                f64::from(f32::from_bits(1)),
                f64::from(f32::EPSILON),
            ),
            "f16" => (
                f16::MAX.to_f64(),
                f16::MIN_POSITIVE.to_f64(),
                f16::MIN_POSITIVE_SUBNORMAL.to_f64(),
                f16::EPSILON.to_f64(),
            ),
            "bf16" => (
                bf16::MAX.to_f64(),
                bf16::MIN_POSITIVE.to_f64(),
                bf16::MIN_POSITIVE_SUBNORMAL.to_f64(),
                bf16::EPSILON.to_f64(),
            ),
            _ => (
                F8E4M3::MAX.to_f64(),
                F8E4M3::MIN_POSITIVE.to_f64(),
                F8E4M3::MIN_POSITIVE_SUBNORMAL.to_f64(),
                F8E4M3::EPSILON.to_f64(),
            ),
        };
        Limits {
            max,
            smallest_normal: normal,
            smallest_subnormal: subnormal,
            eps,
            ..self.limits()
        }
    }
}

/// 2^k exactly, subnormal results included: `2f64.powi(-1074)` is 0 because
/// it divides by 2^1074, which overflows; two half-steps do not.
fn pow2(k: i32) -> f64 {
    2f64.powi(k / 2) * 2f64.powi(k - k / 2)
}

impl Limits {
    /// Names of the fields where `self` and `other` differ.
    pub fn differences(&self, other: &Limits) -> Vec<&'static str> {
        let pairs = [
            ("max", self.max, other.max),
            (
                "smallest_normal",
                self.smallest_normal,
                other.smallest_normal,
            ),
            (
                "smallest_subnormal",
                self.smallest_subnormal,
                other.smallest_subnormal,
            ),
            ("eps", self.eps, other.eps),
        ];
        pairs
            .iter()
            .filter(|(_, a, b)| a != b)
            .map(|(name, _, _)| *name)
            .collect()
    }
}

/// What the limits do to real numbers, shown by converting Candle tensors on
/// the selected device.
/// The formats the demonstrations convert to.
const DEMO_DTYPES: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];
/// Values around the f16 maximum (65504).
const OVERFLOW_VALUES: [f64; 3] = [65504.0, 65520.0, 70000.0];
/// Consecutive integers where bf16 (8 significant bits) starts skipping.
const INTEGERS: [f64; 5] = [256.0, 257.0, 258.0, 259.0, 260.0];
const STEP: f64 = Accumulation::STEP;
const STEPS: usize = Accumulation::STEPS;

/// The format table and the demonstrations, computed on `dev`.
pub fn run(dev: &Device) -> Result<Precision> {
    let formats = FORMATS
        .iter()
        .map(|f| {
            let (limits, crate_limits) = (f.limits(), f.crate_limits());
            FormatLimits {
                format: f.name.into(),
                limits,
                crate_limits,
                crate_differs_in: limits
                    .differences(&crate_limits)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            }
        })
        .collect();
    let per_dtype = |values: &dyn Fn(DType) -> Vec<f64>| -> Result<Vec<RoundTrip>> {
        DEMO_DTYPES
            .iter()
            .map(|&dt| round_trip(&values(dt), dt, dev))
            .collect()
    };
    let one_plus_eps = per_dtype(&|dt| {
        let eps = eps(dt);
        vec![1.0 + eps / 2.0, 1.0 + eps]
    })?;
    let overflow = per_dtype(&|_| OVERFLOW_VALUES.to_vec())?;
    let integers = per_dtype(&|_| INTEGERS.to_vec())?;
    let point_one = DEMO_DTYPES
        .iter()
        .map(|&dt| {
            let stored = round_trip(&[0.1], dt, dev)?.stored[0].0;
            // Against 1/10 itself, not f64's 0.1: |stored - 1/10| = |10 stored - 1| / 10,
            // with 10 stored - 1 from one fused multiply-add, which keeps f64's own
            // error (5.6e-18) that `stored - 0.1` would cancel to 0.
            let abs_error = stored.mul_add(10.0, -1.0).abs() / 10.0;
            Ok(PointOne {
                dtype: dt.as_str().into(),
                stored,
                abs_error,
                rel_error: abs_error / 0.1,
            })
        })
        .collect::<Result<_>>()?;
    let accumulation = DEMO_DTYPES
        .iter()
        .map(|&dt| accumulate(dt, dev))
        .collect::<Result<_>>()?;
    Ok(Precision {
        formats,
        one_plus_eps,
        overflow,
        integers,
        point_one,
        accumulation,
    })
}

fn eps(dt: DType) -> f64 {
    FORMATS
        .iter()
        .find(|f| f.name == dt.as_str())
        .map_or(f64::EPSILON, |f| f.limits().eps)
}

/// `values` as an f64 tensor on `dev`, converted to `dtype` and back.
fn round_trip(values: &[f64], dtype: DType, dev: &Device) -> Result<RoundTrip> {
    let stored = Tensor::new(values, dev)?
        .to_dtype(dtype)?
        .to_dtype(DType::F64)?
        .to_vec1::<f64>()?;
    Ok(RoundTrip {
        dtype: dtype.as_str().into(),
        input: values.to_vec(),
        stored: stored.into_iter().map(JsonF64).collect(),
    })
}

fn accumulate(dtype: DType, dev: &Device) -> Result<Accumulation> {
    let step = Tensor::new(STEP, dev)?.to_dtype(dtype)?;
    let mut running = Tensor::zeros((), dtype, dev)?;
    for _ in 0..STEPS {
        running = (&running + &step)?;
    }
    let many = Tensor::full(STEP, STEPS, dev)?.to_dtype(dtype)?;
    let scalar = |t: Tensor| -> Result<f64> { Ok(t.to_dtype(DType::F64)?.to_scalar()?) };
    Ok(Accumulation {
        dtype: dtype.as_str().into(),
        running_sum: scalar(running)?,
        candle_sum: scalar(many.sum_all()?)?,
        exact: STEP * STEPS as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::sci;

    fn format(name: &str) -> Format {
        *FORMATS.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn layout_matches_the_rust_constants_exactly() {
        for name in ["f64", "f32", "f16", "bf16"] {
            let f = format(name);
            assert_eq!(f.limits(), f.crate_limits(), "{name}");
        }
    }

    #[test]
    fn matches_torch_finfo_as_the_reference_lab_printed_it() {
        let printed = |name| {
            let l = format(name).limits();
            (sci(l.max, 3), sci(l.eps, 3))
        };
        assert_eq!(printed("f32"), ("3.403e+38".into(), "1.192e-07".into()));
        assert_eq!(printed("f16"), ("6.550e+04".into(), "9.766e-04".into()));
        assert_eq!(printed("bf16"), ("3.390e+38".into(), "7.812e-03".into()));
    }

    #[test]
    fn exact_values_of_the_small_formats() {
        let f16 = format("f16").limits();
        assert_eq!(
            (f16.max, f16.smallest_normal, f16.smallest_subnormal),
            (65504.0, 2f64.powi(-14), 2f64.powi(-24))
        );
        let e4m3 = format("f8e4m3").limits();
        // torch.finfo(torch.float8_e4m3fn): max 448, tiny 2^-6, eps 0.125.
        assert_eq!(
            (e4m3.max, e4m3.smallest_normal, e4m3.eps),
            (448.0, 0.015625, 0.125)
        );
        assert_eq!(e4m3.smallest_subnormal, 2f64.powi(-9));
        assert_eq!(e4m3.bits, 8);
        let f64 = format("f64").limits();
        assert_eq!(f64.smallest_subnormal, f64::from_bits(1), "2^-1074, not 0");
        let digits: Vec<u32> = FORMATS.iter().map(|f| f.limits().decimal_digits).collect();
        assert_eq!(digits, [15, 6, 3, 2, 0]);
    }

    #[test]
    fn float8_crate_stops_short_of_the_e4m3_maximum() {
        // float8 0.7 treats 0x7E as infinity and names 0x7D (416) its MAX; the
        // OCP format that GPUs and PyTorch use reaches 448 there. The rest agrees.
        let (layout, krate) = (format("f8e4m3").limits(), format("f8e4m3").crate_limits());
        assert_eq!(krate.max, 416.0);
        assert_ne!(layout.max, krate.max);
        assert_eq!(layout.differences(&krate), ["max"]);
    }
}
