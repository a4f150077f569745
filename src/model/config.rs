//! A model's configuration: [`Config`], the one struct that says a decoder's
//! sizes and constants, whichever architecture it is (its [`Arch`] says what
//! the forward pass does differently: [`super::arch`]). Everything that needs
//! a model's shape reads it here: the GGUF checks, random weights, the
//! layers, the bounds' bytes and FLOPs ([`super::cost`]), `block`'s one
//! layer and `generate`'s whole model. From it come every tensor a model
//! holds, by GGUF's names ([`Config::tensors`]), and so its parameter count.

use super::arch::Arch;

/// A decoder-only transformer's sizes and constants: `layers` layers of
/// grouped-query attention and a gated MLP, an embedding and an output head.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub layers: usize,
    /// The residual stream's width (the embedding's).
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads; they divide `heads` (equal: multi-head attention).
    pub kv_heads: usize,
    /// One head's width: hidden / heads for Llama and Qwen 2, the file's
    /// key length for Qwen 3 and Gemma 3 (whose heads are wider than that).
    pub head_dim: usize,
    /// The MLP's inner width.
    pub mlp: usize,
    pub vocab: usize,
    /// Positions the model takes.
    pub context: usize,
    /// Rotary embedding's base (Llama 2: 10 000; Llama 3: 500 000).
    pub rope_theta: f64,
    /// RMSNorm's epsilon.
    pub rms_eps: f64,
    /// The output head is the embedding (no output.weight).
    pub tied: bool,
    /// Sliding-window layers, where the model has them (Gemma 3).
    pub local: Option<Local>,
}

/// Layers that attend to a window of recent positions only, with a rotary
/// base of their own (Gemma 3: five local layers to each global one).
#[derive(Clone, Debug, PartialEq)]
pub struct Local {
    /// Keys a query sees: its own position and the `window - 1` before it.
    pub window: usize,
    /// Every `every`-th layer (1-based) is global; the others are local.
    pub every: usize,
    pub rope_theta: f64,
}

/// One tensor a model holds: its GGUF name and its shape as candle reads it
/// (a projection is (out, in)).
pub type TensorShape = (String, Vec<usize>);

/// A layer's projections, in the order its matmuls run.
pub const PROJECTIONS: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

impl Config {
    /// Width of the keys and of the values: kv_heads x head_dim.
    pub fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Width of the queries and of attention's output: heads x head_dim
    /// (the hidden width, but for Qwen 3's and Gemma 3's wider heads).
    pub fn q_width(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Query heads per key/value head.
    pub fn groups(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// Whether layer `l` (from 0) attends to a window only, and its window.
    pub fn window(&self, l: usize) -> Option<usize> {
        self.local
            .as_ref()
            .filter(|w| !(l + 1).is_multiple_of(w.every))
            .map(|w| w.window)
    }

    /// Layer `l`'s rotary base.
    pub fn rope_theta(&self, l: usize) -> f64 {
        match (&self.local, self.window(l)) {
            (Some(w), Some(_)) => w.rope_theta,
            _ => self.rope_theta,
        }
    }

    /// The (rows, columns) of one layer's seven projections, in
    /// [`PROJECTIONS`]' order, as `candle_nn::Linear` holds them (out, in).
    pub fn layer_matmuls(&self) -> [(usize, usize); 7] {
        let (h, q, kv, m) = (self.hidden, self.q_width(), self.kv_width(), self.mlp);
        [(q, h), (kv, h), (kv, h), (h, q), (m, h), (m, h), (h, m)]
    }

    /// Multiply-adds of one token through one layer's projections.
    pub fn layer_matmul_params(&self) -> u64 {
        self.layer_matmuls()
            .iter()
            .map(|(r, c)| (*r * *c) as u64)
            .sum()
    }

    /// Multiply-adds of one token through every projection and the head.
    pub fn token_matmul_params(&self) -> u64 {
        self.layers as u64 * self.layer_matmul_params() + (self.vocab * self.hidden) as u64
    }

    /// One layer's weights in the order a layer's file holds them, by the
    /// layer's names ([`NAMES`]), with their shapes: a Llama's nine (two
    /// norms, seven projections as (out, in)), and what its architecture adds.
    pub fn layer_weights(&self) -> Vec<(&'static str, Vec<usize>)> {
        let f = self.arch.features();
        let (h, q, kv, m, d) = (
            self.hidden,
            self.q_width(),
            self.kv_width(),
            self.mlp,
            self.head_dim,
        );
        let mut w = vec![
            ("attn_norm", vec![h]),
            ("wq", vec![q, h]),
            ("wk", vec![kv, h]),
            ("wv", vec![kv, h]),
            ("wo", vec![h, q]),
            ("mlp_norm", vec![h]),
            ("w_gate", vec![m, h]),
            ("w_up", vec![m, h]),
            ("w_down", vec![h, m]),
        ];
        if f.qkv_bias {
            w.extend([("bq", vec![q]), ("bk", vec![kv]), ("bv", vec![kv])]);
        }
        if f.qk_norm {
            w.extend([("q_norm", vec![d]), ("k_norm", vec![d])]);
        }
        if f.sandwich_norms {
            w.extend([("post_attn_norm", vec![h]), ("post_mlp_norm", vec![h])]);
        }
        w
    }

    /// The vectors of one layer (norms' scales, biases), with their lengths.
    pub fn layer_vectors(&self) -> Vec<(&'static str, usize)> {
        self.layer_weights()
            .into_iter()
            .filter_map(|(n, s)| (s.len() == 1).then(|| (n, s[0])))
            .collect()
    }

    /// Every tensor of the model, by GGUF's name, with its shape: the
    /// embedding, the final norm, the output head unless it is the
    /// embedding, and each layer's weights.
    pub fn tensors(&self) -> Vec<TensorShape> {
        let (h, v) = (self.hidden, self.vocab);
        let mut out = vec![
            ("token_embd.weight".to_string(), vec![v, h]),
            ("output_norm.weight".to_string(), vec![h]),
        ];
        if !self.tied {
            out.push(("output.weight".into(), vec![v, h]));
        }
        for l in 0..self.layers {
            for (name, shape) in self.layer_weights() {
                out.push((gguf_name(l, name), shape));
            }
        }
        out
    }

    /// Every weight: the sum over [`Config::tensors`].
    pub fn params(&self) -> u64 {
        self.tensors()
            .iter()
            .map(|(_, s)| s.iter().product::<usize>() as u64)
            .sum()
    }

    /// The output head's GGUF name (the embedding when tied).
    pub fn head_name(&self) -> &'static str {
        if self.tied {
            "token_embd.weight"
        } else {
            "output.weight"
        }
    }
}

/// A layer's weights by the layer's own names (those of `block`'s weight
/// file, which the PyTorch twin reads) and by GGUF's.
pub const NAMES: [(&str, &str); 16] = [
    ("attn_norm", "attn_norm"),
    ("wq", "attn_q"),
    ("wk", "attn_k"),
    ("wv", "attn_v"),
    ("wo", "attn_output"),
    ("mlp_norm", "ffn_norm"),
    ("w_gate", "ffn_gate"),
    ("w_up", "ffn_up"),
    ("w_down", "ffn_down"),
    ("bq", "attn_q.bias"),
    ("bk", "attn_k.bias"),
    ("bv", "attn_v.bias"),
    ("q_norm", "attn_q_norm"),
    ("k_norm", "attn_k_norm"),
    ("post_attn_norm", "post_attention_norm"),
    ("post_mlp_norm", "post_ffw_norm"),
];

/// GGUF's name of layer `l`'s weight `name` (a layer's name, [`NAMES`]):
/// "wq" -> "blk.3.attn_q.weight", "bq" -> "blk.3.attn_q.bias".
pub fn gguf_name(l: usize, name: &str) -> String {
    let g = NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, g)| *g);
    match g.ends_with(".bias") {
        true => format!("blk.{l}.{g}"),
        false => format!("blk.{l}.{g}.weight"),
    }
}

/// GGUF names of layer `l`'s projections, in [`PROJECTIONS`]' order.
pub fn layer_matmul_names(l: usize) -> [String; 7] {
    PROJECTIONS.map(|n| format!("blk.{l}.{n}.weight"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// SmolLM2-135M's sizes (its config.json: 30 layers, hidden 576, 9 heads,
    /// 3 key/value heads, MLP 1536, vocabulary 49152, tied embeddings).
    pub fn smollm2() -> Config {
        Config {
            arch: Arch::Llama,
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
            local: None,
        }
    }

    /// Gemma 3 270M's sizes, as its GGUF's metadata says them.
    pub fn gemma3_270m() -> Config {
        Config {
            arch: Arch::Gemma3,
            layers: 18,
            hidden: 640,
            heads: 4,
            kv_heads: 1,
            head_dim: 256,
            mlp: 2048,
            vocab: 262_144,
            context: 32_768,
            rope_theta: 1e6,
            rms_eps: 1e-6,
            tied: true,
            local: Some(Local {
                window: 512,
                every: 6,
                rope_theta: 10_000.0,
            }),
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
        let untied = Config {
            tied: false,
            ..d.clone()
        };
        assert_eq!(untied.params() - d.params(), 49152 * 576);
        assert_eq!(d.tensors().len(), 2 + 30 * 9);
        assert_eq!(gguf_name(3, "wq"), "blk.3.attn_q.weight");
        assert_eq!(gguf_name(0, "bk"), "blk.0.attn_k.bias");
        assert_eq!(gguf_name(1, "post_mlp_norm"), "blk.1.post_ffw_norm.weight");
    }

    #[test]
    fn gemma3_270m_has_the_files_tensors_and_268_million_parameters() {
        let d = gemma3_270m();
        // The file: 236 tensors (2 + 18 x 13), 268,098,176 parameters (its
        // tensors' elements summed).
        assert_eq!(d.tensors().len(), 236);
        assert_eq!(d.params(), 268_098_176);
        // Q is 4 heads of 256 = 1024 wide, O reads them back to 640.
        assert_eq!(d.layer_matmuls()[0], (1024, 640));
        assert_eq!(d.layer_matmuls()[3], (640, 1024));
        // Layers 6, 12 and 18 (1-based) are global, at the global base.
        let global: Vec<usize> = (0..18).filter(|&l| d.window(l).is_none()).collect();
        assert_eq!(global, [5, 11, 17]);
        assert_eq!(d.rope_theta(5), 1e6);
        assert_eq!(d.rope_theta(0), 10_000.0);
        assert_eq!(d.window(0), Some(512));
    }
}
