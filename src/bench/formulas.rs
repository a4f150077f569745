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

/// A decoder block's sizes, for its formulas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockDims {
    pub batch: u64,
    pub seq: u64,
    pub hidden: u64,
    /// Width of K and V: kv_heads x head_dim, narrower than `hidden` under
    /// grouped-query attention (equal to it under multi-head attention).
    pub kv_width: u64,
    pub mlp: u64,
}

impl BlockDims {
    /// Weights of one block: Q and O (hidden x hidden each), K and V (kv_width
    /// x hidden each), the MLP's gate, up and down (hidden x mlp each) and the
    /// two norms' scales.
    pub fn params(&self) -> u64 {
        let (h, kv, m) = (self.hidden, self.kv_width, self.mlp);
        2 * h * h + 2 * kv * h + 3 * h * m + 2 * h
    }

    /// Tokens one call processes: the whole sequence of each batch (prefill) or
    /// one new token each (decode).
    pub fn tokens(&self, decode: bool) -> u64 {
        if decode {
            self.batch
        } else {
            self.batch * self.seq
        }
    }

    /// Keys each query attends to at most: `seq` in a causal prefill, the
    /// cache and the new token in decode.
    pub fn context(&self, decode: bool) -> u64 {
        if decode {
            self.seq + 1
        } else {
            self.seq
        }
    }
}

/// FLOPs of one block call, its matmuls' (2 per multiply-add, as the
/// transformer FLOP counts of Kaplan et al. 2020 and Chinchilla's appendix
/// count them): the projections and MLP, 2 x tokens x (2 h^2 + 2 h kv + 3 h m)
/// (K and V project to kv_width: GQA's saving, Ainslie et al. 2023), and the
/// attention's two matmuls, 2 x 2 x queries x keys x h (every query head still
/// scores every key, so GQA does not change them; all keys: the causal mask
/// hides half in prefill but the matmul computes them). The norms, softmax,
/// rotary and element-wise work are a few FLOPs per element, not counted.
pub fn block_flops(d: &BlockDims, decode: bool) -> f64 {
    let (h, kv, m) = (d.hidden as f64, d.kv_width as f64, d.mlp as f64);
    let tokens = d.tokens(decode) as f64;
    let linear = 2.0 * tokens * (2.0 * h * h + 2.0 * kv * h + 3.0 * h * m);
    let attention = 4.0 * tokens * d.context(decode) as f64 * h;
    linear + attention
}

/// The least one block call moves at `elem` bytes per element (STREAM's
/// counting): every weight read once, the input read and the output written,
/// and the keys and values, kv_width wide: written once in prefill (as a KV
/// cache would hold them); in decode the cache's `seq` positions read and the
/// new token's written into it (a preallocated cache: nothing already cached is
/// copied), 2 x batch x (seq + 1) x kv_width.
pub fn block_bytes(d: &BlockDims, decode: bool, elem: u64) -> u64 {
    let activations = 2 * d.tokens(decode) * d.hidden;
    let kv = 2 * d.batch * d.context(decode) * d.kv_width;
    (d.params() + activations + kv) * elem
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
    fn a_llama_7b_layer_counts_as_its_paper_does() {
        // Llama-2-7B's layer: hidden 4096, MLP 11008.
        let d = BlockDims {
            batch: 1,
            seq: 2048,
            hidden: 4096,
            kv_width: 4096,
            mlp: 11008,
        };
        assert_eq!(d.params(), 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096);
        // 202 million weights a layer: 32 layers are the 6.5 billion of the model
        // beside its embeddings.
        assert_eq!(d.params() / 1_000_000, 202);
        // Prefill: 2 x params x tokens for the projections (the norms' scales
        // are not matmuls), plus 4 x seq^2 x hidden for attention.
        let linear = 2.0 * 2048.0 * (d.params() - 2 * 4096) as f64;
        assert_eq!(
            block_flops(&d, false),
            linear + 4.0 * 2048.0 * 2048.0 * 4096.0
        );
        // Decode: one token, 2049 keys.
        let linear = 2.0 * (d.params() - 2 * 4096) as f64;
        assert_eq!(block_flops(&d, true), linear + 4.0 * 2049.0 * 4096.0);
        // Decode reads every weight once a token: at bf16, 404 MB plus the cache.
        let bytes = block_bytes(&d, true, 2);
        assert_eq!(bytes, (d.params() + 2 * 4096 + 2 * 2049 * 4096) * 2);
        assert_eq!(d.tokens(false), 2048);
        assert_eq!(d.context(true), 2049);
    }

    #[test]
    fn grouped_query_attention_counts_as_its_models_do() {
        // Llama-3-8B (Meta's config.json: hidden 4096, 32 heads, 8 KV heads of
        // 128, MLP 14336, 32 layers, vocabulary 128256, untied embeddings):
        // 8,030,261,248 parameters, the "8.03B" of its model card.
        let l3 = BlockDims {
            batch: 1,
            seq: 8192,
            hidden: 4096,
            kv_width: 8 * 128,
            mlp: 14336,
        };
        assert_eq!(32 * l3.params() + 2 * 128_256 * 4096 + 4096, 8_030_261_248);
        // SmolLM2-135M (hidden 576, 9 heads, 3 KV heads of 64, MLP 1536, 30
        // layers, vocabulary 49152, tied embeddings): 134,515,008, its "135M".
        let smol = BlockDims {
            batch: 1,
            seq: 2048,
            hidden: 576,
            kv_width: 3 * 64,
            mlp: 1536,
        };
        assert_eq!(smol.params(), 3_540_096);
        assert_eq!(30 * smol.params() + 49_152 * 576 + 576, 134_515_008);
        // A tiny block by hand: batch 2, seq 3, hidden 4, K/V 2 wide, MLP 6:
        // 2*16 + 2*2*4 + 3*24 + 8 = 128 weights.
        let d = BlockDims {
            batch: 2,
            seq: 3,
            hidden: 4,
            kv_width: 2,
            mlp: 6,
        };
        assert_eq!(d.params(), 128);
        // Projections 2 x tokens x (32 + 16 + 72); attention unchanged by GQA.
        assert_eq!(
            block_flops(&d, false),
            2.0 * 6.0 * 120.0 + 4.0 * 6.0 * 3.0 * 4.0
        );
        assert_eq!(
            block_flops(&d, true),
            2.0 * 2.0 * 120.0 + 4.0 * 2.0 * 4.0 * 4.0
        );
        // Keys and values are kv_width wide: prefill writes 2 x 6 x 2, decode
        // reads 2 x 2 x 4 x 2 (3 cached and the new one, per sequence).
        assert_eq!(block_bytes(&d, false, 4), (128 + 2 * 6 * 4 + 2 * 6 * 2) * 4);
        assert_eq!(
            block_bytes(&d, true, 2),
            (128 + 2 * 2 * 4 + 2 * 2 * 4 * 2) * 2
        );
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
