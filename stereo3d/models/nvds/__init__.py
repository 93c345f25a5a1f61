"""NVDS: our own state-dict-compatible model, its checkpoints, the ONNX exports and the ONNX Runtime stabiliser."""
