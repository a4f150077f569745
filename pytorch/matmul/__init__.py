"""The PyTorch twin of `matmul` and `cpu_vs_gpu` (run: python pytorch/matmul)."""
