//! The formulas behind `generate`'s and `block`'s rates, as pure functions
//! over a decoder's configuration ([`Config`]), each with its source.
//! FLOPs count 2 per multiply-add (the BLAS convention `formulas.rs` uses;
//! Kaplan et al., "Scaling Laws for Neural Language Models", 2020, Table 1:
//! a forward pass is 2 N FLOPs per token plus the attention's 2 n_layer
//! n_ctx d_attn); generation's bound is the memory-bound decode argument
//! (every weight read once per token: Pope et al., "Efficiently Scaling
//! Transformer Inference", 2022, section 2; llama.cpp's and vLLM's docs make
//! the same estimate), with the bandwidth a copy measured in the same run.

use super::Config;

/// FLOPs of prompt processing over `tokens` tokens from an empty cache, as
/// candle-transformers' quantized models and the suite's decoder compute it:
/// every projection for every token, the output head for the last token
/// only, and causal attention (Q K^T and the weights times V: 2 x 2 x heads
/// x head_dim per query-key pair, token i attending to i + 1 keys, or to
/// its window on a sliding-window layer). Element-wise work is not counted.
pub fn pp_flops(d: &Config, tokens: u64) -> f64 {
    let projections = 2.0 * tokens as f64 * (d.layers as u64 * d.layer_matmul_params()) as f64;
    let head = 2.0 * (d.vocab * d.hidden) as f64;
    let pairs: u64 = (0..d.layers)
        .map(|l| causal_pairs(tokens, d.window(l)))
        .sum();
    let attention = 4.0 * d.q_width() as f64 * pairs as f64;
    projections + head + attention
}

/// Query-key pairs of `tokens` causal queries, each seeing its own position
/// and the ones before it, at most `window` of them.
pub fn causal_pairs(tokens: u64, window: Option<usize>) -> u64 {
    match window.map(|w| w as u64) {
        Some(w) if w < tokens => w * (w + 1) / 2 + (tokens - w) * w,
        _ => tokens * (tokens + 1) / 2,
    }
}

/// FLOPs of the matmuls alone at prompt processing's shapes (the same
/// projections and head as [`pp_flops`], no attention): what the matmul
/// roofline's rate is computed from.
pub fn pp_matmul_flops(d: &Config, tokens: u64) -> f64 {
    2.0 * tokens as f64 * (d.layers as u64 * d.layer_matmul_params()) as f64
        + 2.0 * (d.vocab * d.hidden) as f64
}

/// Bytes of weights one generated token reads: `matmul_bytes` (every
/// projection and the output head, as the row stores them), the vectors
/// (norms' scales, biases: [`Config::layer_vectors`] and the final norm) in
/// `vector_elem` bytes each, and one row of the embedding in `embed_elem`.
pub fn weight_bytes_per_token(
    d: &Config,
    matmul_bytes: u64,
    vector_elem: u64,
    embed_elem: u64,
) -> u64 {
    let per_layer: usize = d.layer_vectors().iter().map(|(_, n)| n).sum();
    let vectors = (d.layers * per_layer + d.hidden) as u64 * vector_elem;
    matmul_bytes + vectors + d.hidden as u64 * embed_elem
}

/// One call of one layer: `batch` sequences of `seq` tokens (prefill), or
/// one new token each against a cache of `seq` (decode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub batch: u64,
    pub seq: u64,
    pub decode: bool,
}

impl Call {
    /// Tokens the call processes: every sequence's whole (prefill) or one
    /// new token each (decode).
    pub fn tokens(&self) -> u64 {
        match self.decode {
            true => self.batch,
            false => self.batch * self.seq,
        }
    }

    /// Keys each query attends to at most: `seq` in a causal prefill, the
    /// cache and the new token in decode.
    pub fn context(&self) -> u64 {
        match self.decode {
            true => self.seq + 1,
            false => self.seq,
        }
    }
}

/// Weights of one layer of `d`: its projections and its vectors.
pub fn layer_params(d: &Config) -> u64 {
    let vectors: usize = d.layer_vectors().iter().map(|(_, n)| n).sum();
    d.layer_matmul_params() + vectors as u64
}

/// FLOPs of one layer call, its matmuls' (2 per multiply-add, as the
/// transformer FLOP counts of Kaplan et al. 2020 and Chinchilla's appendix
/// count them): the projections and MLP, 2 x tokens x their weights (K and
/// V project to kv_width: GQA's saving, Ainslie et al. 2023), and the
/// attention's two matmuls, 2 x 2 x queries x keys x heads x head_dim (every
/// query head still scores every key, so GQA does not change them; all keys:
/// the causal mask hides half in prefill but the matmul computes them). The
/// norms, softmax, rotary and element-wise work are a few FLOPs per element,
/// not counted.
pub fn block_flops(d: &Config, c: Call) -> f64 {
    let tokens = c.tokens() as f64;
    let linear = 2.0 * tokens * d.layer_matmul_params() as f64;
    let attention = 4.0 * tokens * c.context() as f64 * d.q_width() as f64;
    linear + attention
}

/// The least one layer call moves at `elem` bytes per element (STREAM's
/// counting): every weight read once, the input read and the output written,
/// and the keys and values, kv_width wide: written once in prefill (as a KV
/// cache would hold them); in decode the cache's `seq` positions read and the
/// new token's written into it (a preallocated cache: nothing already cached
/// is copied), 2 x batch x (seq + 1) x kv_width.
pub fn block_bytes(d: &Config, c: Call, elem: u64) -> u64 {
    let activations = 2 * c.tokens() * d.hidden as u64;
    let kv = 2 * c.batch * c.context() * d.kv_width() as u64;
    (layer_params(d) + activations + kv) * elem
}

/// Generation's upper bound in tokens/s: a token cannot be faster than
/// reading its weights once at the measured bandwidth (GB/s, 10^9 bytes/s).
pub fn tg_bound_tokens_per_s(bandwidth_gb_per_s: f64, bytes_per_token: u64) -> f64 {
    bandwidth_gb_per_s * 1e9 / bytes_per_token as f64
}

/// FLOPs of `tokens` tokens run after `depth` already in the cache, the
/// output head computed `heads` times (a prompt's pass: once, for its last
/// token; `tokens` decode steps: every step): every projection for every
/// token, and causal attention over the cache and the new tokens (each
/// token's keys up to itself, within a window on a sliding-window layer),
/// as [`pp_flops`] counts them; `flops_after(d, 0, n, 1)` is `pp_flops(d, n)`.
pub fn flops_after(d: &Config, depth: u64, tokens: u64, heads: u64) -> f64 {
    let projections = 2.0 * tokens as f64 * (d.layers as u64 * d.layer_matmul_params()) as f64;
    let head = 2.0 * (d.vocab * d.hidden) as f64 * heads as f64;
    let pairs: u64 = (0..d.layers)
        .map(|l| causal_pairs(depth + tokens, d.window(l)) - causal_pairs(depth, d.window(l)))
        .sum();
    projections + head + 4.0 * d.q_width() as f64 * pairs as f64
}

/// FLOPs of one decode token's products alone: every layer's projections
/// and the output head (what a batch step's matmuls do per sequence;
/// [`flops_after`] less attention's).
pub fn matmul_flops_per_token(d: &Config) -> f64 {
    2.0 * d.token_matmul_params() as f64
}

/// Bytes the KV cache holds per token at `elem` bytes an element: every
/// layer's key and value, kv_width wide (the suite's decoder and candle's
/// models keep every position, a sliding-window layer's too).
pub fn kv_bytes_per_token(d: &Config, elem: u64) -> u64 {
    2 * d.layers as u64 * d.kv_width() as u64 * elem
}

/// Bytes of the KV cache one query reads when `keys` keys are cached (its own
/// included): each layer's keys and values, a sliding-window layer's within
/// its window only.
pub fn kv_read_bytes(d: &Config, keys: u64, elem: u64) -> u64 {
    let read: u64 = (0..d.layers)
        .map(|l| d.window(l).map_or(keys, |w| keys.min(w as u64)))
        .sum();
    2 * read * d.kv_width() as u64 * elem
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::tests::smollm2;

    #[test]
    fn pp_flops_are_two_per_parameter_per_token_plus_attention() {
        let d = smollm2();
        let one = pp_flops(&d, 1);
        // One token: 2 N for the projections and head, and one key per query.
        let n = d.token_matmul_params() as f64;
        assert_eq!(one, 2.0 * n + 4.0 * (30 * 9 * 64) as f64);
        // Ten tokens: the head once, 55 query-key pairs.
        let ten = pp_flops(&d, 10);
        let layers = (30 * d.layer_matmul_params()) as f64;
        assert_eq!(
            ten,
            20.0 * layers + 2.0 * (49152 * 576) as f64 + 4.0 * (30 * 576) as f64 * 55.0
        );
        assert_eq!(
            pp_matmul_flops(&d, 10),
            20.0 * layers + 2.0 * (49152 * 576) as f64
        );
    }

    #[test]
    fn a_window_caps_the_pairs_each_query_sees() {
        assert_eq!(causal_pairs(10, None), 55);
        assert_eq!(causal_pairs(10, Some(512)), 55);
        // Window 4: queries 0-3 see 1-4 keys (10), the other 6 see 4 each.
        assert_eq!(causal_pairs(10, Some(4)), 10 + 24);
        let g = crate::model::config::tests::gemma3_270m();
        // At 1024 tokens 15 layers see 512 keys at most, 3 see them all.
        let pairs = 15 * causal_pairs(1024, Some(512)) + 3 * 1024 * 1025 / 2;
        let want = 2.0 * 1024.0 * (18 * g.layer_matmul_params()) as f64
            + 2.0 * (262_144 * 640) as f64
            + 4.0 * 1024.0 * pairs as f64;
        assert_eq!(pp_flops(&g, 1024), want);
    }

    /// A Llama layer of these sizes (heads of 64 unless `head_dim` says).
    fn llama(hidden: usize, heads: usize, kv_heads: usize, mlp: usize) -> Config {
        Config {
            hidden,
            heads,
            kv_heads,
            head_dim: hidden / heads,
            mlp,
            layers: 1,
            ..smollm2()
        }
    }

    #[test]
    fn a_llama_7b_layer_counts_as_its_paper_does() {
        // Llama-2-7B's layer: hidden 4096, 32 heads, MLP 11008.
        let d = llama(4096, 32, 32, 11008);
        let params = layer_params(&d);
        assert_eq!(params, 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096);
        // 202 million weights a layer: 32 layers are the 6.5 billion of the model
        // beside its embeddings.
        assert_eq!(params / 1_000_000, 202);
        // Prefill: 2 x params x tokens for the projections (the norms' scales
        // are not matmuls), plus 4 x seq^2 x hidden for attention.
        let prefill = Call {
            batch: 1,
            seq: 2048,
            decode: false,
        };
        let linear = 2.0 * 2048.0 * (params - 2 * 4096) as f64;
        assert_eq!(
            block_flops(&d, prefill),
            linear + 4.0 * 2048.0 * 2048.0 * 4096.0
        );
        // Decode: one token, 2049 keys.
        let decode = Call {
            decode: true,
            ..prefill
        };
        let linear = 2.0 * (params - 2 * 4096) as f64;
        assert_eq!(block_flops(&d, decode), linear + 4.0 * 2049.0 * 4096.0);
        // Decode reads every weight once a token: at bf16, 404 MB plus the cache.
        let bytes = block_bytes(&d, decode, 2);
        assert_eq!(bytes, (params + 2 * 4096 + 2 * 2049 * 4096) * 2);
        assert_eq!(prefill.tokens(), 2048);
        assert_eq!(decode.context(), 2049);
    }

    #[test]
    fn grouped_query_attention_counts_as_its_models_do() {
        // Llama-3-8B (Meta's config.json: hidden 4096, 32 heads, 8 KV heads of
        // 128, MLP 14336, 32 layers, vocabulary 128256, untied embeddings):
        // 8,030,261,248 parameters, the "8.03B" of its model card.
        let l3 = Config {
            layers: 32,
            vocab: 128_256,
            tied: false,
            ..llama(4096, 32, 8, 14336)
        };
        assert_eq!(
            32 * layer_params(&l3) + 2 * 128_256 * 4096 + 4096,
            8_030_261_248
        );
        assert_eq!(l3.params(), 8_030_261_248);
        // SmolLM2-135M: 3,540,096 a layer, 134,515,008 in all, its "135M".
        let smol = smollm2();
        assert_eq!(layer_params(&smol), 3_540_096);
        assert_eq!(30 * layer_params(&smol) + 49_152 * 576 + 576, 134_515_008);
        // A tiny block by hand: batch 2, seq 3, hidden 4 (2 heads of 2), K/V 2
        // wide (1 head), MLP 6: 2*16 + 2*2*4 + 3*24 + 8 = 128 weights.
        let d = llama(4, 2, 1, 6);
        assert_eq!(layer_params(&d), 128);
        let prefill = Call {
            batch: 2,
            seq: 3,
            decode: false,
        };
        let decode = Call {
            decode: true,
            ..prefill
        };
        // Projections 2 x tokens x (32 + 16 + 72); attention unchanged by GQA.
        assert_eq!(
            block_flops(&d, prefill),
            2.0 * 6.0 * 120.0 + 4.0 * 6.0 * 3.0 * 4.0
        );
        assert_eq!(
            block_flops(&d, decode),
            2.0 * 2.0 * 120.0 + 4.0 * 2.0 * 4.0 * 4.0
        );
        // Keys and values are kv_width wide: prefill writes 2 x 6 x 2, decode
        // reads 2 x 2 x 4 x 2 (3 cached and the new one, per sequence).
        assert_eq!(
            block_bytes(&d, prefill, 4),
            (128 + 2 * 6 * 4 + 2 * 6 * 2) * 4
        );
        assert_eq!(
            block_bytes(&d, decode, 2),
            (128 + 2 * 2 * 4 + 2 * 2 * 4 * 2) * 2
        );
    }

    #[test]
    fn the_bound_is_bandwidth_over_bytes_per_token() {
        let d = smollm2();
        // Q4_1: 20 bytes per 32 weights; the head (the Q8_0 embedding) 34 per 32.
        let layers = 30 * d.layer_matmul_params() / 32 * 20;
        let head = (49152 * 576) / 32 * 34;
        let bytes = weight_bytes_per_token(&d, layers + head, 4, 4);
        assert_eq!(bytes, layers + head + 61 * 576 * 4 + 576 * 4);
        // 10 GB/s over ~97 MB (the 92.1 MiB `generate` shows for q4_1): ~104 tokens/s.
        let bound = tg_bound_tokens_per_s(10.0, bytes);
        assert!((bound - 1e10 / bytes as f64).abs() < 1e-9);
        assert!((100.0..110.0).contains(&bound), "{bound}");
    }

    #[test]
    fn flops_after_a_depth_add_up_to_a_pass_from_scratch() {
        let d = smollm2();
        assert_eq!(flops_after(&d, 0, 64, 1), pp_flops(&d, 64));
        // 64 tokens after 448 cost what 512 cost less the first 448, the
        // head apart (once each pass).
        let head = 2.0 * (d.vocab * d.hidden) as f64;
        let split = flops_after(&d, 448, 64, 1) + pp_flops(&d, 448) - head;
        assert!((split - pp_flops(&d, 512)).abs() < 1e-6 * split);
        // A decode step at depth 2048 attends to 2049 keys a layer.
        let step = flops_after(&d, 2048, 1, 1) - flops_after(&d, 0, 1, 1);
        let want = 4.0 * d.q_width() as f64 * (d.layers as f64) * 2048.0;
        assert!((step - want).abs() < 1e-6 * want, "{step} {want}");
        // A first token's products are its FLOPs less attention over itself
        // (one key a layer): SmolLM2's 2 x 134.5 M parameters, the tied
        // embedding counted once, as the head.
        let products = flops_after(&d, 0, 1, 1) - 4.0 * (d.q_width() * d.layers) as f64;
        assert!((matmul_flops_per_token(&d) - products).abs() < 1e-6 * products);
        assert!((matmul_flops_per_token(&d) / 2.0 - 134.5e6).abs() < 0.1e6);
    }

    #[test]
    fn kv_bytes_are_every_layers_keys_and_values_read_within_windows() {
        let d = smollm2();
        // SmolLM2-135M: 30 layers, 3 key/value heads of 64, fp32.
        assert_eq!(kv_bytes_per_token(&d, 4), 2 * 30 * 3 * 64 * 4);
        assert_eq!(kv_read_bytes(&d, 100, 4), 100 * kv_bytes_per_token(&d, 4));
        let g = crate::model::config::tests::gemma3_270m();
        let w = g.window(0).unwrap() as u64;
        let globals = (0..g.layers).filter(|&l| g.window(l).is_none()).count() as u64;
        let per_layer = 2 * g.kv_width() as u64 * 2;
        let far = kv_read_bytes(&g, 10 * w, 2);
        assert_eq!(
            far,
            per_layer * (globals * 10 * w + (g.layers as u64 - globals) * w)
        );
    }
}
