"""Depth Anything 3: the table of its variants, the PyTorch model, its hub checkpoints, the ONNX export, the
runtime."""
