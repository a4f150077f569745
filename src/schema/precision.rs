//! The body of `precision`: each float format's limits, and what converting
//! real values to it does (rounding, overflow, skipped integers, drift).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::JsonF64;

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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PrecisionResults {
    pub formats: Vec<FormatLimits>,
    /// 1 + eps/2 and 1 + eps in each format.
    pub one_plus_eps: Vec<RoundTrip>,
    pub overflow: Vec<RoundTrip>,
    pub integers: Vec<RoundTrip>,
    pub point_one: Vec<PointOne>,
    pub accumulation: Vec<Accumulation>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FormatLimits {
    pub format: String,
    /// Derived from the bit layout; equal to `torch.finfo`.
    pub limits: Limits,
    /// The same, as the Rust type's constants (std, half, float8) state them.
    pub crate_limits: Limits,
    /// Fields where the crate's constants differ from the layout.
    pub crate_differs_in: Vec<String>,
}

/// Values after a round trip f64 -> `dtype` -> f64, done on the device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RoundTrip {
    pub dtype: String,
    pub input: Vec<f64>,
    /// What the format stored; an overflow is "inf".
    pub stored: Vec<JsonF64>,
}

/// 0.1 as stored in one format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PointOne {
    pub dtype: String,
    pub stored: f64,
    pub abs_error: f64,
    pub rel_error: f64,
}

/// Summing 0.01 ten thousand times in one format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accumulation {
    pub dtype: String,
    /// 0.01 added one at a time, each partial sum rounded to `dtype`.
    pub running_sum: f64,
    /// Candle's `sum` over a tensor of 10,000 copies of 0.01 in `dtype`.
    pub candle_sum: f64,
    pub exact: f64,
}

impl Accumulation {
    /// The number added, and how many times: the exact sum is their product.
    pub const STEP: f64 = 0.01;
    pub const STEPS: usize = 10_000;
}

/// Facts, not timings: no row a reader walks, nothing the types leave to check.
impl super::rows::Rows for PrecisionResults {
    fn timed_rows(&self) -> Vec<super::TimedRow<'_>> {
        Vec::new()
    }

    fn validate(&self) -> anyhow::Result<()> {
        Ok(())
    }
}
