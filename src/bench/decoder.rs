//! The formulas behind `generate`'s rates, as pure functions over a
//! Llama-architecture model's sizes ([`LlamaDims`]), each with its source.
//! FLOPs count 2 per multiply-add (the BLAS convention `formulas.rs` uses;
//! Kaplan et al., "Scaling Laws for Neural Language Models", 2020, Table 1:
//! a forward pass is 2 N FLOPs per token plus the attention's 2 n_layer
//! n_ctx d_attn); generation's bound is the memory-bound decode argument
//! (every weight read once per token: Pope et al., "Efficiently Scaling
//! Transformer Inference", 2022, section 2; llama.cpp's and vLLM's docs make
//! the same estimate), with the bandwidth a copy measured in the same run.

/// A Llama-architecture decoder's sizes: layers of attention with
/// grouped-query heads and a SwiGLU MLP, an embedding and an output head.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaDims {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub mlp: usize,
    pub vocab: usize,
    /// Positions the model takes.
    pub context: usize,
    pub rope_theta: f64,
    pub rms_eps: f64,
    /// The output head is the embedding (no output.weight).
    pub tied: bool,
}

impl LlamaDims {
    /// Width of the keys and of the values: kv_heads x head_dim.
    pub fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// The (rows, columns) of one layer's seven projections, as
    /// `candle_nn::Linear` holds them (out, in): Q, K, V, O, gate, up, down.
    pub fn layer_matmuls(&self) -> [(usize, usize); 7] {
        let (h, kv, m) = (self.hidden, self.kv_width(), self.mlp);
        [(h, h), (kv, h), (kv, h), (h, h), (m, h), (m, h), (h, m)]
    }

    /// Multiply-adds of one token through one layer's projections.
    pub fn layer_matmul_params(&self) -> u64 {
        self.layer_matmuls()
            .iter()
            .map(|(r, c)| (*r * *c) as u64)
            .sum()
    }

    /// Every weight: the layers' projections and two norms, the embedding,
    /// the final norm, and the output head unless it is the embedding.
    pub fn params(&self) -> u64 {
        let (h, v) = (self.hidden as u64, self.vocab as u64);
        let layer = self.layer_matmul_params() + 2 * h;
        let head = if self.tied { 0 } else { v * h };
        self.layers as u64 * layer + v * h + h + head
    }

    /// Multiply-adds of one token through every projection and the head.
    pub fn token_matmul_params(&self) -> u64 {
        self.layers as u64 * self.layer_matmul_params() + (self.vocab * self.hidden) as u64
    }
}

/// FLOPs of prompt processing over `tokens` tokens from an empty cache, as
/// candle-transformers' quantized Llama and the float path compute it: every
/// projection for every token, the output head for the last token only, and
/// causal attention (Q K^T and the weights times V: 2 x 2 x heads x head_dim
/// per query-key pair, token i attending to i + 1 keys). Element-wise work is
/// not counted.
pub fn pp_flops(d: &LlamaDims, tokens: u64) -> f64 {
    let projections = 2.0 * tokens as f64 * (d.layers as u64 * d.layer_matmul_params()) as f64;
    let head = 2.0 * (d.vocab * d.hidden) as f64;
    let pairs = (tokens * (tokens + 1) / 2) as f64;
    let attention = 4.0 * (d.layers * d.heads * d.head_dim) as f64 * pairs;
    projections + head + attention
}

/// FLOPs of the matmuls alone at prompt processing's shapes (the same
/// projections and head as [`pp_flops`], no attention): what the matmul
/// roofline's rate is computed from.
pub fn pp_matmul_flops(d: &LlamaDims, tokens: u64) -> f64 {
    2.0 * tokens as f64 * (d.layers as u64 * d.layer_matmul_params()) as f64
        + 2.0 * (d.vocab * d.hidden) as f64
}

/// Bytes of weights one generated token reads: `matmul_bytes` (every
/// projection and the output head, as the row stores them), the norms in
/// `norm_elem` bytes each, and one row of the embedding in `embed_elem`.
pub fn weight_bytes_per_token(
    d: &LlamaDims,
    matmul_bytes: u64,
    norm_elem: u64,
    embed_elem: u64,
) -> u64 {
    let norms = (2 * d.layers as u64 + 1) * d.hidden as u64 * norm_elem;
    matmul_bytes + norms + d.hidden as u64 * embed_elem
}

/// Generation's upper bound in tokens/s: a token cannot be faster than
/// reading its weights once at the measured bandwidth (GB/s, 10^9 bytes/s).
pub fn tg_bound_tokens_per_s(bandwidth_gb_per_s: f64, bytes_per_token: u64) -> f64 {
    bandwidth_gb_per_s * 1e9 / bytes_per_token as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M's sizes (its config.json: 30 layers, hidden 576, 9 heads,
    /// 3 key/value heads, MLP 1536, vocabulary 49152, tied embeddings).
    pub fn smollm2() -> LlamaDims {
        LlamaDims {
            layers: 30,
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            mlp: 1536,
            vocab: 49152,
            context: 8192,
            rope_theta: 100_000.0,
            rms_eps: 1e-5,
            tied: true,
        }
    }

    #[test]
    fn smollm2_has_its_published_134_5_million_parameters() {
        let d = smollm2();
        // Per layer: 2 x 576^2 (Q, O) + 2 x 192 x 576 (K, V) + 3 x 576 x 1536.
        assert_eq!(
            d.layer_matmul_params(),
            2 * 331_776 + 2 * 110_592 + 3 * 884_736
        );
        // 134,515,008: the model card's "135M", what transformers counts.
        assert_eq!(d.params(), 134_515_008);
        let untied = LlamaDims {
            tied: false,
            ..d.clone()
        };
        assert_eq!(untied.params() - d.params(), 49152 * 576);
    }

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
}
