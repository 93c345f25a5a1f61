"""Exporters: PyTorch weights to fixed-size ONNX graphs, each with a validation report."""
