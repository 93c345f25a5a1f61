"""NVDS temporal depth stabiliser: model (torch), checkpoint loading, ONNX export, ORT runtime.

Import the submodules directly: ``stabiliser`` needs only numpy and ONNX Runtime, the others need torch.
"""
