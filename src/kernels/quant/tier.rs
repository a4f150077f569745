//! Which instruction set the quantized kernels run with: the best this CPU
//! has, found once at run time, and every tier it runs (the tests hold each
//! to the portable code and to Candle's op).

use std::sync::OnceLock;

/// The instruction set the quantized kernels run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantTier {
    /// AVX512-VNNI's 256-bit forms (with AVX512-VL), on AVX2.
    Vnni512,
    /// AVX-VNNI, on AVX2.
    AvxVnni,
    /// AVX2 (with FMA and F16C).
    Avx2,
    /// Integer arithmetic the compiler vectorizes as it can.
    Portable,
}

impl QuantTier {
    /// The best this CPU has.
    pub fn detect() -> QuantTier {
        Self::available()[0]
    }

    /// Whether this CPU has the tier's instructions.
    pub fn runs_here(self) -> bool {
        Self::available().contains(&self)
    }

    /// Every tier this CPU runs, best first (checked once).
    pub fn available() -> &'static [QuantTier] {
        static TIERS: OnceLock<Vec<QuantTier>> = OnceLock::new();
        TIERS.get_or_init(Self::find)
    }

    fn find() -> Vec<QuantTier> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") && has!("f16c") {
                if has!("avx512vnni") && has!("avx512vl") {
                    out.push(QuantTier::Vnni512);
                }
                if has!("avxvnni") {
                    out.push(QuantTier::AvxVnni);
                }
                out.push(QuantTier::Avx2);
            }
        }
        out.push(QuantTier::Portable);
        out
    }

    pub fn name(self) -> &'static str {
        match self {
            QuantTier::Vnni512 => "avx512-vnni",
            QuantTier::AvxVnni => "avx-vnni",
            QuantTier::Avx2 => "avx2",
            QuantTier::Portable => "portable",
        }
    }
}
