//! The formulas behind every rate the suite reports, as pure functions, each
//! with its source. FLOPs of a matmul follow the BLAS convention (2n^3: n
//! multiplications and n additions per output, as LAPACK Working Note 41 and
//! the reference lab count them); bytes follow the STREAM benchmark's counting
//! (McCalpin, "Memory Bandwidth and Machine Balance", 1995: every input element
//! read once, every output element written once); the roofline is Williams,
//! Waterman and Patterson's ("Roofline", CACM 2009). Rates are in units of
//! 10^9 per second (GFLOP/s, GB/s).

/// Floating-point operations of one n x n by n x n matmul: each of the n^2
/// outputs takes n multiplications and n - 1 additions, counted as 2n^3 by
/// convention (as BLAS benchmarks and the reference lab do).
pub fn matmul_flops(n: usize) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// Throughput in GFLOP/s of one n x n matmul that took `ms` milliseconds.
pub fn gflops(n: usize, ms: f64) -> f64 {
    matmul_flops(n) / (ms * 1e-3) / 1e9
}

/// Bytes of one n x n matrix at `elem_bytes` per element: n^2 x element size.
pub fn matrix_bytes(n: usize, elem_bytes: usize) -> u64 {
    (n as u64).pow(2) * elem_bytes as u64
}

/// Bytes of the three n x n matrices (A, B and C) at `elem_bytes` per element:
/// the least a matmul can move, each matrix once.
pub fn payload_bytes(n: usize, elem_bytes: usize) -> u64 {
    3 * matrix_bytes(n, elem_bytes)
}

/// How many times faster the second was: `slow_ms` over `fast_ms`.
pub fn speedup(slow_ms: f64, fast_ms: f64) -> f64 {
    slow_ms / fast_ms
}

/// Bytes and FLOPs of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flops: u64,
}

impl Traffic {
    pub fn bytes_moved(&self) -> u64 {
        self.bytes_read + self.bytes_written
    }

    /// Arithmetic intensity: FLOPs per byte moved.
    pub fn flop_per_byte(&self) -> f64 {
        self.flops as f64 / self.bytes_moved() as f64
    }
}

/// A copy of `bytes`: read once, written once.
pub fn copy_traffic(bytes: u64) -> Traffic {
    Traffic {
        bytes_read: bytes,
        bytes_written: bytes,
        flops: 0,
    }
}

/// GB/s (10^9 bytes per second) of `bytes` moved in `ms` milliseconds.
pub fn gb_per_s(bytes: u64, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// `count` per second, done in `ms` milliseconds.
pub fn per_s(count: u64, ms: f64) -> f64 {
    count as f64 / (ms * 1e-3)
}

/// The roofline: what the measured ceilings allow at `flop_per_byte`,
/// min(flop_per_byte x bandwidth, compute). GB/s x FLOP/byte = GFLOP/s.
pub fn attainable_gflop_per_s(
    flop_per_byte: f64,
    memory_gb_per_s: f64,
    compute: Option<f64>,
) -> f64 {
    let memory_bound = flop_per_byte * memory_gb_per_s;
    compute.map_or(memory_bound, |c| memory_bound.min(c))
}

/// Bytes an RMSNorm over `rows` x `width` moves at `elem` bytes per element,
/// fused (`candle_nn::ops::rms_norm`: x and the scale read once, the output
/// written once) and composed as `rms_norm_slow` composes it (in f32 for f16
/// and bf16: cast in, square, sum over the row, divide, add eps, square root,
/// divide the row, cast out, scale), each op reading its inputs and writing its
/// output as a tensor of its own.
pub fn rms_norm_bytes(rows: u64, width: u64, elem: u64) -> (u64, u64) {
    let n = rows * width;
    let fused = (2 * n + width) * elem;
    let inner = elem.max(4);
    let casts = if elem < 4 { 2 * n * (elem + inner) } else { 0 };
    let composed = casts
        + 2 * n * inner // square
        + (n + rows) * inner // sum over the row
        + 3 * 2 * rows * inner // divide by width, add eps, square root
        + (2 * n + rows) * inner // divide the row
        + (2 * n + width) * elem; // scale
    (fused, composed)
}

/// Bytes a softmax over `rows` rows of `width` moves at `elem` bytes per
/// element: fused (`softmax_last_dim`: read once, written once) and composed as
/// `candle_nn::ops::softmax` does it (row max, subtract, exp, row sum, divide):
/// 7 full passes and 4 of one value per row.
pub fn softmax_bytes(rows: u64, width: u64, elem: u64) -> (u64, u64) {
    let n = rows * width;
    (2 * n * elem, (7 * n + 4 * rows) * elem)
}

/// Bytes rotary embedding moves over `x` elements with tables of `table`
/// elements each (cos and sin, positions x head_dim / 2) at `elem` bytes per
/// element: fused (`rope`: x and both tables read, x written) and composed as
/// `rope_slow` does it (both tables widened by a concat, x times cos, the
/// rotated half made by a negation and a concat, times sin, then added): 10
/// passes over x and 6 over a table.
pub fn rope_bytes(x: u64, table: u64, elem: u64) -> (u64, u64) {
    ((2 * x + 2 * table) * elem, (10 * x + 6 * 2 * table) * elem)
}

/// Amdahl's law: the speedup of the whole when a share `f` of its time runs
/// `s` times faster and the rest does not (Amdahl, AFIPS 1967).
pub fn amdahl(f: f64, s: f64) -> f64 {
    1.0 / ((1.0 - f) + f / s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_and_bytes_follow_their_formulas() {
        assert_eq!(matmul_flops(4096), 2.0 * 4096f64.powi(3));
        // The reference: 4096 at 7.44 ms is 18473.0 GFLOP/s.
        assert!((gflops(4096, 7.44) - 18473.0).abs() < 0.1);
        // The reference's payload: 192 MiB at fp32, 96 MiB at fp16.
        assert_eq!(payload_bytes(4096, 4), 192 << 20);
        assert_eq!(payload_bytes(4096, 2), 96 << 20);
        assert_eq!(speedup(10.0, 2.0), 5.0);
    }

    #[test]
    fn rates_follow_their_formulas() {
        assert_eq!(gb_per_s(1_000_000_000, 1000.0), 1.0);
        assert_eq!(gb_per_s(3_000_000, 1.0), 3.0);
        assert_eq!(per_s(500, 250.0), 2000.0);
    }

    #[test]
    fn the_roofline_is_the_lower_of_its_two_ceilings() {
        assert_eq!(attainable_gflop_per_s(0.25, 100.0, Some(1000.0)), 25.0);
        assert_eq!(attainable_gflop_per_s(100.0, 100.0, Some(1000.0)), 1000.0);
        assert_eq!(attainable_gflop_per_s(2.0, 100.0, None), 200.0);
    }

    #[test]
    fn fused_kernels_move_their_tensors_once_and_composed_ops_more() {
        // RMSNorm of 4 rows of 8 in f32: fused 2 x 32 + 8 elements.
        let (fused, composed) = rms_norm_bytes(4, 8, 4);
        assert_eq!(fused, (2 * 32 + 8) * 4);
        assert_eq!(
            composed,
            (2 * 32 + (32 + 4) + 6 * 4 + (2 * 32 + 4) + (2 * 32 + 8)) * 4
        );
        // In bf16 the composed form adds the casts to and from f32.
        let (f16_fused, f16_composed) = rms_norm_bytes(4, 8, 2);
        assert_eq!(f16_fused, fused / 2);
        assert!(f16_composed > composed - (2 * 32 + 8) * 2, "{f16_composed}");
        assert_eq!(softmax_bytes(2, 10, 2), (2 * 20 * 2, (140 + 8) * 2));
        assert_eq!(rope_bytes(100, 10, 4), (880, (1000 + 120) * 4));
    }

    #[test]
    fn amdahl_bounds_the_whole_by_its_part() {
        assert_eq!(amdahl(1.0, 4.0), 4.0);
        assert_eq!(amdahl(0.0, 4.0), 1.0);
        // Half the time 4x faster: 1 / (0.5 + 0.125) = 1.6.
        assert!((amdahl(0.5, 4.0) - 1.6).abs() < 1e-12);
    }
}
