"""The PyTorch and transformers peers of candle-lab's `generate` (experiments/generate.rs), on
the same GGUF file: `twin` runs the model in eager PyTorch on the weights the `gguf` package
dequantizes (Q and K unpermuted, as Candle's float path does), `hf` runs Hugging Face
transformers' own GGUF loading and greedy `generate`; `reference` writes and checks the
fixture the Rust and Python tests share (transformers' token ids and greedy answer), and
`side_by_side` prints Candle's tokens/s beside both. Run as `python -m generate ...` from
pytorch/ (`just pytorch-generate`, `just generate-peers`)."""
