//! Which instruction set the quantized kernels run with: the best this CPU
//! has, found once at run time, and every tier it runs (the tests hold each
//! to the portable code and to Candle's op).

use std::sync::OnceLock;

/// The instruction set the quantized kernels run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantTier {
    /// AVX512-VNNI (with AVX512F, BW and VL), on AVX2: the 32-value blocks
    /// sixteen weight rows at a time in 512-bit registers, the k-quants in
    /// the 256-bit forms.
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

    // Off x86 the vector starts and ends with the portable tier alone.
    #[cfg_attr(not(target_arch = "x86_64"), allow(clippy::vec_init_then_push))]
    fn find() -> Vec<QuantTier> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") && has!("f16c") {
                if has!("avx512f") && has!("avx512bw") && has!("avx512vnni") && has!("avx512vl") {
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

    /// Whether the 32-value blocks' kernels take packed groups two at a
    /// time (512-bit registers).
    pub(super) fn pairs_groups(self) -> bool {
        self == QuantTier::Vnni512
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
