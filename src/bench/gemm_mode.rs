//! Candle's process-wide cuBLAS switches (f32 as TF32, f16 and bf16 reduced
//! accumulation), set for one row at a time.

use std::sync::{Mutex, MutexGuard};

use crate::precision::Precision;

/// Candle's three reduced-precision GEMM switches (f32 as TF32, f16, bf16), in
/// that order, as a row of precision `p` wants them: only its own mode on.
pub fn flags_for(p: Precision) -> [bool; 3] {
    [
        p == Precision::Tf32,
        p == Precision::F16Reduced,
        p == Precision::Bf16Reduced,
    ]
}

/// Guards Candle's GEMM switches: they are process-wide, so two threads (two
/// tests under cargo's parallel runner) setting them for their own rows would
/// make each other's GEMMs use the wrong mode.
static GEMM_SWITCHES: Mutex<()> = Mutex::new(());

/// Sets Candle's process-wide reduced-precision GEMM switches for one row and
/// puts them back when dropped, holding [`GEMM_SWITCHES`] all the while, so rows
/// that set the switches run one at a time. The switches change cuBLAS calls
/// only: CPU GEMMs ignore them (and Candle's CPU-build stubs always read true).
pub(crate) struct GemmMode {
    saved: [bool; 3],
    _lock: MutexGuard<'static, ()>,
}

impl GemmMode {
    pub(crate) fn set(precision: Precision) -> Self {
        // A test that panicked while holding the lock leaves the switches in a
        // state the next row overwrites anyway: poisoning is not an error here.
        let lock = GEMM_SWITCHES.lock().unwrap_or_else(|e| e.into_inner());
        let saved = read_switches();
        write_switches(flags_for(precision));
        Self { saved, _lock: lock }
    }

    /// Sets the switches for `precision` under the lock this guard holds: a
    /// row timed in turn with another precision's (the fp32 reference) sets
    /// each one's before its call.
    pub(crate) fn switch(&self, precision: Precision) {
        write_switches(flags_for(precision));
    }

    /// Puts the switches back as they were before [`Self::set`].
    fn restore(&self) {
        write_switches(self.saved);
    }
}

impl Drop for GemmMode {
    // Runs before the fields are dropped: the switches are restored while the
    // lock is still held.
    fn drop(&mut self) {
        self.restore();
    }
}

fn read_switches() -> [bool; 3] {
    use candle_core::cuda as c;
    [
        c::gemm_reduced_precision_f32(),
        c::gemm_reduced_precision_f16(),
        c::gemm_reduced_precision_bf16(),
    ]
}

fn write_switches([tf32, f16_reduced, bf16_reduced]: [bool; 3]) {
    use candle_core::cuda as c;
    c::set_gemm_reduced_precision_f32(tf32);
    c::set_gemm_reduced_precision_f16(f16_reduced);
    c::set_gemm_reduced_precision_bf16(bf16_reduced);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_turns_on_only_its_own_gemm_switch() {
        assert_eq!(flags_for(Precision::Tf32), [true, false, false]);
        assert_eq!(flags_for(Precision::F16Reduced), [false, true, false]);
        assert_eq!(flags_for(Precision::Bf16Reduced), [false, false, true]);
        for p in Precision::ALL {
            let on = flags_for(p).iter().filter(|&&f| f).count();
            assert_eq!(on, usize::from(p.reduced_gemm()), "{p}");
        }
    }

    #[test]
    fn gemm_mode_holds_the_switches_lock_while_it_lives() {
        let mode = GemmMode::set(Precision::F32);
        assert!(
            GEMM_SWITCHES.try_lock().is_err(),
            "no other row or test can set the switches meanwhile"
        );
        drop(mode);
    }

    // Candle's CPU-build switches are stubs (they read true, set nothing), so
    // what the switches hold is checked on CUDA builds only.
    #[cfg(feature = "cuda")]
    #[test]
    fn gemm_mode_is_set_for_one_row_then_restored() {
        let mode = GemmMode::set(Precision::Tf32);
        assert_eq!(read_switches(), [true, false, false]);
        assert_eq!(
            mode.saved, [false; 3],
            "rows leave Candle's defaults behind"
        );
        // Restored while the lock is still held, so no other test interferes.
        mode.restore();
        assert_eq!(read_switches(), mode.saved);
    }
}
