//! Errors as users see them: one line. Candle appends a backtrace to some
//! errors when RUST_BACKTRACE is set, and anyhow's `{:#}` joins causes with
//! ": "; [`error_line`] keeps the first line of that chain. [`is_unsupported`]
//! tells a library's refusal of a mode this GPU does not offer from a failure.

/// The first line of an error's text with its causes (`{e:#}`).
pub fn error_line(e: &dyn std::fmt::Display) -> String {
    let text = format!("{e:#}");
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

/// cuBLAS's refusals of a call as unsupported, as Candle passes them on.
/// cudarc 0.19 shows a `CublasError` as its Debug form (its cublas/result.rs:
/// `write!(f, "{self:?}")`), and Candle 0.11 wraps it unchanged
/// (`CudaError::Cublas` and `Error::Cuda` are both `#[error(transparent)]`,
/// candle-core's cuda_backend/error.rs). NOT_SUPPORTED: "the combination of the
/// parameters ... is not supported" (cuBLAS's docs of cublasGemmEx), as for
/// CUBLAS_COMPUTE_32F_FAST_16BF with bf16 A, B and C; ARCH_MISMATCH: a feature
/// this GPU's architecture lacks (bf16 before compute capability 8.0).
const UNSUPPORTED: [&str; 2] = [
    "CublasError(CUBLAS_STATUS_NOT_SUPPORTED)",
    "CublasError(CUBLAS_STATUS_ARCH_MISMATCH)",
];

/// Whether `e` is the GPU's library refusing the call as unsupported (a mode
/// this GPU or library does not offer), which a row records as "unsupported"
/// rather than failed. Anything else, other cuBLAS errors included, is a failure.
pub fn is_unsupported(e: &anyhow::Error) -> bool {
    let text = format!("{e:#}");
    UNSUPPORTED.iter().any(|refusal| text.contains(refusal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_librarys_refusals_are_unsupported() {
        // As the bf16-reduced row's GEMM fails when cuBLAS refuses the mode.
        let refused = anyhow::anyhow!("CublasError(CUBLAS_STATUS_NOT_SUPPORTED)")
            .context("bf16-reduced 8192x8192");
        assert!(is_unsupported(&refused));
        assert!(is_unsupported(&anyhow::anyhow!(
            "CublasError(CUBLAS_STATUS_ARCH_MISMATCH)"
        )));
        for failure in [
            "CublasError(CUBLAS_STATUS_EXECUTION_FAILED)",
            "CublasError(CUBLAS_STATUS_INVALID_VALUE)",
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")",
            "unsupported dtype BF16 for matmul",
        ] {
            assert!(!is_unsupported(&anyhow::anyhow!("{failure}")), "{failure}");
        }
    }

    /// The real error, as Candle builds it from cudarc's status: the text the
    /// classifier looks for is the one a refused GEMM carries.
    #[cfg(feature = "cuda")]
    #[test]
    fn candles_cublas_refusal_is_unsupported() {
        use candle_core::cuda_backend::{cudarc::cublas, CudaError};
        let status = cublas::sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED;
        let candle =
            candle_core::Error::from(CudaError::Cublas(cublas::result::CublasError(status)));
        assert!(is_unsupported(&anyhow::Error::from(candle)));
        let status = cublas::sys::cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED;
        let candle =
            candle_core::Error::from(CudaError::Cublas(cublas::result::CublasError(status)));
        assert!(!is_unsupported(&anyhow::Error::from(candle)));
    }

    #[test]
    fn errors_print_as_one_line_without_backtraces() {
        let e = anyhow::anyhow!("driver said no\n   0: candle_core::error::Error::bt")
            .context("--device cuda:0");
        assert_eq!(error_line(&e), "--device cuda:0: driver said no");
    }
}

/// Panics inside [`contained`] right now: while any is running, the panic
/// hook stays silent (the panic becomes that call's error line instead).
static CONTAINING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs `f`, third-party code fed what a file says (candle's block decoding,
/// the tokenizer, the template engine, candle-transformers' loader), so that a
/// panic in it is this call's one-line error ("`what` failed inside a
/// library: ..."), exit 1 rather than a backtrace. What the suite checks
/// first is what such code should never see; this is the boundary for what
/// a check missed. A panic on another thread of the pool (rayon passes it on
/// to the caller) is silenced too while a call runs.
pub fn contained<T>(what: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    use std::sync::atomic::Ordering;
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINING.load(Ordering::SeqCst) == 0 {
                default(info);
            }
        }));
    });
    CONTAINING.fetch_add(1, Ordering::SeqCst);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CONTAINING.fetch_sub(1, Ordering::SeqCst);
    caught.unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Err(anyhow::anyhow!(
            "{what} failed inside a library: {}",
            error_line(&why)
        ))
    })
}

#[cfg(test)]
mod contained_tests {
    use super::contained;

    #[test]
    fn a_panic_inside_is_one_error_line() {
        let e = contained("parsing", || -> anyhow::Result<()> {
            panic!("index 9 of 3\nmore")
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "parsing failed inside a library: index 9 of 3"
        );
        assert_eq!(contained("x", || Ok(5)).unwrap(), 5);
    }
}
