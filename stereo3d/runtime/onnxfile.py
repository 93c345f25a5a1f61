"""The inputs of an ONNX file (names and dimensions) and its metadata, read straight from its protobuf, without the
``onnx`` package (an export-time dependency only) and without opening a session: a TensorRT session needs its
optimisation profile, which names the inputs and their shapes, before the session exists, and a model opened by
OpenVINO's own runtime (``openvino_runtime``) has its exporter's metadata read here.

Only the few fields on the way are decoded (ModelProto.graph → GraphProto.input → ValueInfoProto.type →
TypeProto.tensor_type.shape → dims); everything else, the weights included, is skipped by its length.
"""

from __future__ import annotations

import mmap
from pathlib import Path

Dim = int | str | None  # a fixed size, a named (dynamic) axis, or an axis with neither


def graph_inputs(path: str | Path) -> dict[str, list[Dim]]:
    """``{input name: [dim, ...]}`` of the model's graph inputs, in their order (initializers listed as inputs by
    old exporters are left out)."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        graph = _first(data, 0, len(data), 7)
        if graph is None:
            raise ValueError(f"{Path(path).name}: no graph in this ONNX file")
        initializers = {_text(data, *_first(data, *item, 8)) for item in _fields(data, *graph, 5)}  # TensorProto.name
        inputs = {}
        for start, end in _fields(data, *graph, 11):
            name = _text(data, *_first(data, start, end, 1))
            if name not in initializers:
                inputs[name] = _dims(data, start, end)
        return inputs


def model_metadata(path: str | Path) -> dict[str, str]:
    """The model's ``metadata_props`` (what the exporter stored: variant, contract, ...)."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        found = {}
        for start, end in _fields(data, 0, len(data), 14):  # ModelProto.metadata_props: StringStringEntryProto
            key, value = _first(data, start, end, 1), _first(data, start, end, 2)
            if key is not None:
                found[_text(data, *key)] = _text(data, *value) if value is not None else ""
        return found


def _dims(data, start: int, end: int) -> list[Dim]:
    shape = None
    value_type = _first(data, start, end, 2)
    tensor = _first(data, *value_type, 1) if value_type else None
    shape = _first(data, *tensor, 2) if tensor else None
    if shape is None:
        return []
    dims: list[Dim] = []
    for dim_start, dim_end in _fields(data, *shape, 1):
        dim: Dim = None
        for number, wire, value in _walk(data, dim_start, dim_end):
            if number == 1 and wire == 0:
                dim = value
            elif number == 2 and wire == 2:
                dim = _text(data, *value)
        dims.append(dim)
    return dims


def _first(data, start: int, end: int, number: int) -> tuple[int, int] | None:
    return next(iter(_fields(data, start, end, number)), None)


def _fields(data, start: int, end: int, number: int) -> list[tuple[int, int]]:
    """(start, end) of every length-delimited field ``number`` of the message in data[start:end]."""
    return [value for field, wire, value in _walk(data, start, end) if field == number and wire == 2]


def _walk(data, start: int, end: int):
    """(field number, wire type, value) of each field: an int for varints, (start, end) for length-delimited."""
    at = start
    while at < end:
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, wire, value
        elif wire == 2:
            length, at = _varint(data, at)
            yield number, wire, (at, at + length)
            at += length
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire} at byte {at}")


def _varint(data, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _text(data, start: int, end: int) -> str:
    return bytes(data[start:end]).decode()
