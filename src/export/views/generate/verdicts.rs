//! What a generate row's verdicts rest on, said where they could mislead:
//! a ratio against Candle's quantized rows named by its baseline (a scalar
//! dot product or a vectorized one). Plain readings of the file: nothing is
//! re-measured.

/// What a quantized row's ratio against Candle's is against, on the CPU
/// (candle-core's `quantized/k_quants.rs`): its Q4_1, Q5_0 and Q5_1 dot
/// products are scalar loops (no SIMD form on any architecture), its Q4_0,
/// Q8_0 and k-quant ones vectorized. `None` for a float row or a mixture
/// (whose types the precision does not name).
pub(super) fn candle_baseline(precision: &str) -> Option<String> {
    let t = precision.split(' ').next()?;
    let kind = match t {
        "q4_1" | "q5_0" | "q5_1" => "scalar",
        "q4_0" | "q8_0" | "q2_k" | "q3_k" | "q4_k" | "q5_k" | "q6_k" => "vectorized",
        _ => return None,
    };
    Some(format!(
        "against Candle's {kind} {} product",
        t.to_uppercase()
    ))
}

/// The kernels line's closing sentence on the CPU: what its quantized
/// ratios are against.
pub(super) const CANDLE_BASELINES: &str =
    "Candle's Q4_1, Q5_0 and Q5_1 CPU dot products are scalar, so a ratio against those rows \
     (or a mixture holding those types) mostly measures Candle's missing SIMD; its Q4_0, Q8_0 \
     and k-quant products are vectorized: q8_0's ratio is the fair comparison";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_against_candle_names_its_baseline() {
        let b = |p: &str| candle_baseline(p);
        assert_eq!(
            b("q4_1 (stored)").as_deref(),
            Some("against Candle's scalar Q4_1 product")
        );
        assert_eq!(
            b("q5_0").as_deref(),
            Some("against Candle's scalar Q5_0 product")
        );
        assert_eq!(
            b("q8_0").as_deref(),
            Some("against Candle's vectorized Q8_0 product")
        );
        assert_eq!(b("q4_k_m"), None, "a mixture's types are not in its name");
        assert_eq!(b("fp32"), None);
    }
}
