"""The PyTorch twin of `kernels` (run: python pytorch/kernels)."""
