"""The PyTorch twin of `block` (run: python pytorch/block)."""
