"""ONNX Runtime sessions and the GPU devices jobs take."""
