"""Tensors joined where they live: a one-node ONNX graph (Concat along axis 0) that ONNX Runtime runs on the
device of another session, so that tensors on a GPU are joined on the GPU.

ONNX Runtime's Python API can keep a session's outputs on the device (I/O binding) but has no device-side copy
or concatenation of its own, and the runtime is torch-free. So the graph is written here, as the few bytes of
protobuf an ONNX model is (the ``onnx`` package is an export-time dependency only); tests/test_nvds_stabiliser.py
checks them against ``onnx.helper``'s.
"""

from __future__ import annotations

import functools

from stereo3d.runtime.sessions import session_device

INPUTS = 4  # NVDS's window: the features of four frames


def concat_model(inputs: int = INPUTS, opset: int = 13) -> bytes:
    """A ModelProto: float inputs ``x0 .. x{inputs-1}`` of any shape, ``y = Concat(axis=0)`` of them."""
    names = [f"x{index}" for index in range(inputs)]
    float_type = _field(1, _key(1, 0) + _varint(1))  # TypeProto.tensor_type.elem_type = FLOAT
    node = b"".join(_field(1, name) for name in names) + _field(2, "y") + _field(4, "Concat")
    node += _field(5, _field(1, "axis") + _key(3, 0) + _varint(0) + _key(20, 0) + _varint(2))  # an INT attribute
    graph = _field(1, node) + _field(2, "concat")
    graph += b"".join(_field(11, _field(1, name) + _field(2, float_type)) for name in names)
    graph += _field(12, _field(1, "y") + _field(2, float_type))
    return _key(1, 0) + _varint(8) + _field(7, graph) + _field(8, _field(1, "") + _key(2, 0) + _varint(opset))


def concat_session(like):
    """An InferenceSession of ``concat_model()`` where session ``like`` keeps its tensors: on its CUDA device, with
    CUDA's options, or else on the CPU (a plugin provider such as OpenVINO hands its outputs to the host)."""
    import onnxruntime as ort

    if session_device(like)[0] != "cuda":
        return ort.InferenceSession(_model_bytes(), providers=["CPUExecutionProvider"])
    options, built_in = like.get_provider_options(), ort.get_available_providers()
    providers = [(name, options.get(name, {})) for name in like.get_providers() if name in built_in]
    return ort.InferenceSession(_model_bytes(), providers=providers)


def join(session, values: list, device: tuple[str, int]):
    """The OrtValues ``values`` (on ``device``) joined along axis 0 by ``session`` (a ``concat_session``), as an
    OrtValue on the same device."""
    binding = session.io_binding()
    for index, value in enumerate(values):
        binding.bind_ortvalue_input(f"x{index}", value)
    binding.bind_output("y", *device)
    session.run_with_iobinding(binding)
    return binding.get_outputs()[0]


@functools.cache
def _model_bytes() -> bytes:
    return concat_model()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _field(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field (a string or an embedded message)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return _key(number, 2) + _varint(len(data)) + data
