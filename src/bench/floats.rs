//! The limits of each float format Candle computes in: f64, f32, f16, bf16 and
//! f8e4m3. Each limit is derived from the format's bit layout (sign, exponent
//! bits, mantissa bits) by a pure function, and checked against the constants
//! that Rust, the `half` crate and Candle's f8 type (the `float8` crate) ship.
//! The layout values are what `torch.finfo` reports.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// What a format can represent. All values are exact (powers of two and their
/// sums), so f64 holds them without rounding.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    pub bits: u32,
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    pub max: f64,
    /// Smallest positive normal number (`torch.finfo.smallest_normal`, `tiny`).
    pub smallest_normal: f64,
    /// Smallest positive subnormal number: below it, everything is 0.
    pub smallest_subnormal: f64,
    /// Gap between 1 and the next larger number (`torch.finfo.eps`).
    pub eps: f64,
    /// Decimal digits that always survive a round trip: floor((p - 1) log10 2)
    /// with p = mantissa_bits + 1 (C's FLT_DIG; `numpy.finfo.precision`).
    pub decimal_digits: u32,
}

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

/// Scientific notation as Python prints `f"{x:.3e}"`: "3.403e+38", "9.766e-04".
pub fn sci(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let s = format!("{x:.digits$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn sci_formats_like_python() {
        assert_eq!(sci(65504.0, 3), "6.550e+04");
        assert_eq!(sci(1.0, 1), "1.0e+00");
        assert_eq!(sci(f64::INFINITY, 3), "inf");
    }
}
