"""Depth Anything 3 (Small/Base): the PyTorch model, its hub checkpoints, the ONNX export, the runtime."""
