//! exp(x) for f32 in a form the compiler vectorizes: `f32::exp` is a libm
//! call per element, which no loop around it can turn into SIMD. Here the
//! range reduction and the polynomial are plain arithmetic and the edge cases
//! are selects, so a loop of them runs 4 to 16 lanes at a time.
//!
//! exp(x) = 2^n * exp(r) with n = round(x / ln 2) and r = x - n ln 2 in
//! [-ln 2 / 2, ln 2 / 2]; ln 2 is split in two constants so that r is exact
//! (Cody and Waite); exp(r) is Cephes' `expf` polynomial (S. Moshier, Cephes
//! Math Library, expf.c), within 2 ulp of the true value; 2^n is built in the
//! exponent bits. Rounding uses the 1.5 x 2^23 trick (adding it leaves no
//! fraction bits, and n in the low bits), which needs no SSE4.1 `roundps`
//! and no float-to-int conversion (Rust's saturates, which does not vectorize).

#[cfg(target_arch = "x86_64")]
pub(super) mod x86;

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 = LN2_HI + LN2_LO, LN2_HI exact in 9 bits (Cephes' C1, C2).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// exp overflows f32 above this. Under LO it is within a hair of f32's
/// smallest normal (2^-126 at -87.3365) or below, and is taken as 0: LO sits
/// just above -126 ln 2, so that the clamped input's 2^n x exp(r) is never
/// subnormal (at -87.33655, r came out a hair under 0 and the product
/// subnormal: a microcode assist a vector, a quarter of `perf`'s samples in
/// a 16-token prompt's attention tile on the Xeon VM, whose masked scores
/// are -inf).
const HI: f32 = 88.376_26;
const LO: f32 = -87.33;
/// Cephes' `expf` polynomial's coefficients, highest power first: exp(r) =
/// 1 + r + r^2 (P0 r^5 + ... + P5).
const P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5,
];
/// Adding and subtracting this rounds a float below 2^22 to an integer.
const ROUND: f32 = 12_582_912.0;

/// e^x, to within 2 ulp; +inf above 88.38, 0 below -87.33 (where the true
/// value is at most 1.19e-38, next to subnormal), NaN for NaN. Never a
/// subnormal result, which costs a microcode assist to compute.
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    let c = x.clamp(LO, HI);
    let t = c * LOG2E + ROUND;
    let n = t - ROUND;
    // n as an integer from t's low bits: `n as i32` saturates, which the
    // compiler cannot vectorize.
    let ni = t.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let r = c - n * LN2_HI - n * LN2_LO;
    let r2 = r * r;
    let p = ((((P[0] * r + P[1]) * r + P[2]) * r + P[3]) * r + P[4]) * r + P[5];
    let er = p * r2 + r + 1.0;
    // 2^n, n in -126..=127 after the clamp.
    let scale = f32::from_bits((ni.wrapping_add(127) as u32) << 23);
    let y = er * scale;
    let y = if x > HI { f32::INFINITY } else { y };
    let y = if x < LO { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_libm_within_a_few_ulp() {
        let mut worst = 0.0f64;
        let mut x = LO;
        while x < HI {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        // 2 ulp of f32 is 2.4e-7 relative.
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-100.0), 0.0);
        // No subnormal result anywhere below the cut (nor at it).
        for i in 0..2000 {
            let y = exp(LO - 0.5 + i as f32 * 0.0005);
            assert!(y == 0.0 || y.is_normal(), "{y:e}");
        }
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }
}
