"""The PyTorch and transformers peers of candle-lab's `generate` (experiments/generate.rs)
on the same GGUF file, writing the suite's result file (`generate` body) that `compare`
pairs with Candle's: `twin` runs the model in eager PyTorch on the weights the `gguf`
package dequantizes (Q and K unpermuted, as Candle's float path does), `hf` runs Hugging
Face transformers' own GGUF loading and model; `reference` writes the fixture the Rust
and Python tests share (transformers' token ids and greedy answer). Run as
`python pytorch/generate ...` (`just pytorch-generate`, `just generate-peers`)."""
