"""ONNX graph passes of the NVDS exports: onnxscript's optimizer without its pattern rewriter, exact GELUs
reordered into the form ONNX Runtime fuses, the opset-18 forms of Pad and Resize rewritten for opset 17, and an
op census to check that a fixed-tier graph computes no shapes at run time."""

from __future__ import annotations

from collections import Counter

import numpy as np

# Ops that compute shapes at run time or write through indices: none may appear in a fixed-tier graph.
FORBIDDEN_OPS = frozenset(
    {"ScatterND", "ScatterElements", "Shape", "Size", "Range", "ConstantOfShape", "NonZero", "Loop", "If"}
)


def optimize(model):
    """onnxscript's optimizer minus its pattern rewriter: constant folding (which also folds every Shape
    of a static value), dead-node removal, constant lifting, dedup, CSE. The rewriter costs 10x the time
    of everything else here and changes nothing that matters for these graphs."""
    import onnx_ir as ir
    import onnx_ir.passes.common as common
    from onnxscript.optimizer import _constant_folding

    passes = ir.passes.Sequential(
        common.InlinePass(),
        ir.passes.PassManager(
            [
                _constant_folding.FoldConstantsPass(
                    shape_inference=True, input_size_limit=8192, output_size_limit=262144
                ),
                common.RemoveUnusedNodesPass(),
            ],
            steps=2,
            early_stop=True,
        ),
        common.RemoveUnusedNodesPass(),
        common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common.DeduplicateInitializersPass(),
        common.CommonSubexpressionEliminationPass(),
        common.OutputFixPass(),
        common.NameFixPass(),
    )
    passes(model)
    return ir.serde.serialize_model(model)


def gelu_in_fusable_order(proto) -> int:
    """Reorder each exact GELU from ``x * (0.5 * (1 + erf(x / sqrt2)))`` to ``(x * (1 + erf(x / sqrt2))) * 0.5``.

    The exporter writes the first form, which ONNX Runtime's Gelu fusion does not recognise, so every GELU
    runs as five element-wise passes (Div, Erf, Add, Mul, Mul) over the MLP's widest tensor; the second
    form is fused into one Gelu kernel (CPU and CUDA). The two forms are the same numbers: scaling by 0.5
    is exact in binary floating point, so ``x * (0.5 * a)`` and ``(x * a) * 0.5`` round identically (short
    of subnormal results, where both are 0 to within 1e-38). Returns the number of GELUs reordered.
    """
    from onnx import numpy_helper

    scalars = {
        init.name: float(numpy_helper.to_array(init))
        for init in proto.graph.initializer
        if init.data_type == 1 and len(init.dims) == 0
    }  # float32 scalars
    producer = {out: node for node in proto.graph.node for out in node.output}
    consumers: dict[str, list] = {}
    for node in proto.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def only_consumer(name, op_type):
        nodes = consumers.get(name, [])
        return nodes[0] if len(nodes) == 1 and nodes[0].op_type == op_type else None

    def other(node, name):
        rest = [i for i in node.input if i != name]
        return rest[0] if len(rest) == 1 else None

    count = 0
    for erf in [node for node in proto.graph.node if node.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        if div is None or div.op_type != "Div" or scalars.get(div.input[1]) != np.float32(2**0.5):
            continue
        x = div.input[0]
        add = only_consumer(erf.output[0], "Add")
        half = add and only_consumer(add.output[0], "Mul")
        mul = half and only_consumer(half.output[0], "Mul")
        if not mul or scalars.get(other(add, erf.output[0])) != 1.0 or other(mul, half.output[0]) != x:
            continue
        half_name = other(half, add.output[0])
        if scalars.get(half_name) != 0.5:
            continue
        half.input[:] = [x, add.output[0]]
        mul.input[:] = [half.output[0], half_name]
        count += 1
    return count


def to_opset_17(proto) -> None:
    """Rewrite the opset-18 forms of Pad (``axes`` input) and Resize (new default-valued attributes).

    Every other op in these graphs has the same schema in opsets 17 and 18; anything else is refused.
    """
    import onnx
    from onnx import numpy_helper

    changed_in_18 = []
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if onnx.defs.get_schema(node.op_type, 18).since_version != onnx.defs.get_schema(node.op_type, 17).since_version:
            changed_in_18.append(node)
    consts = {init.name: init for init in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    consts[node.output[0]] = attr.t
    ranks = {
        vi.name: len(vi.type.tensor_type.shape.dim)
        for vi in list(proto.graph.value_info) + list(proto.graph.input) + list(proto.graph.output)
    }
    for node in changed_in_18:
        if node.op_type == "Resize":
            for attr in list(node.attribute):
                default = {"antialias": 0, "keep_aspect_ratio_policy": b"stretch"}.get(attr.name)
                if default is None:
                    continue
                value = attr.i if attr.type == onnx.AttributeProto.INT else attr.s
                if value != default:
                    raise ValueError(f"Resize {node.name}: {attr.name}={value!r} has no opset-17 form")
                node.attribute.remove(attr)
            if "axes" in [a.name for a in node.attribute]:
                raise ValueError(f"Resize {node.name}: axes attribute has no opset-17 form")
        elif node.op_type == "Pad":
            if len(node.input) < 4 or not node.input[3]:
                continue
            axes = numpy_helper.to_array(consts[node.input[3]]).tolist()
            pads = numpy_helper.to_array(consts[node.input[1]]).tolist()
            rank = ranks[node.input[0]]
            full = [0] * (2 * rank)
            for i, axis in enumerate(axes):
                axis %= rank
                full[axis], full[rank + axis] = pads[i], pads[len(axes) + i]
            name = node.input[1] + "_opset17"
            proto.graph.initializer.append(numpy_helper.from_array(np.array(full, dtype=np.int64), name))
            node.input[1] = name
            del node.input[3]
        else:
            raise ValueError(f"{node.op_type} changed in opset 18; cannot export it at opset 17")
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = 17
    onnx.checker.check_model(proto)


def op_census(model) -> Counter:
    """Op types of a model's main graph (and of any nested graphs), counted."""
    counts = Counter()

    def walk(graph):
        for node in graph.node:
            counts[node.op_type] += 1
            for attr in node.attribute:
                if attr.g.node:
                    walk(attr.g)

    walk(model.graph)
    return counts
