# Weights → fixed-size ONNX graphs, each with a validation report beside it. Model and weight
# file names come from stereo3d.models.names (through P).
from stereo3d.models.validation import validation_path


# DA3 depth-only export of one variant × size × contract (name carries all three).
rule export_da3:
    input:
        weights=get_da3_export_weights,
    output:
        onnx=P.da3_onnx,
        validation=str(validation_path(P.da3_onnx)),
    log:
        P.log("export_da3", "{stem}"),
    benchmark:
        P.benchmark("export_da3", "{stem}")
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=8000,
    params:
        model=get_da3_export,
        opset=config["export"]["da3_opset"],
        exporter=config["export"]["da3_exporter"],
    script:
        "../../scripts/da3_to_onnx.py"


NVDS_EXPORT_PARAMS = dict(
    opset=config["export"]["nvds_opset"],
    tiny=config["export"]["nvds_architecture"] == "tiny",
)


# NVDS split pair at one tier: the backbone (once per frame) and the head (per 4-frame window).
rule export_nvds_split:
    input:
        checkpoint=P.nvds_weights,
    output:
        backbone=P.nvds_onnx("backbone"),
        head=P.nvds_onnx("head"),
        backbone_validation=str(validation_path(P.nvds_onnx("backbone"))),
        head_validation=str(validation_path(P.nvds_onnx("head"))),
    log:
        P.log("export_nvds", "split_{tier}"),
    benchmark:
        P.benchmark("export_nvds", "split_{tier}")
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=12000,
    params:
        **NVDS_EXPORT_PARAMS,
        tier=get_tier_size,
        mode="split",
    script:
        "../../scripts/export_nvds_onnx.py"


# NVDS monolith at one tier: one graph over the whole 4-frame window.
rule export_nvds_monolith:
    input:
        checkpoint=P.nvds_weights,
    output:
        monolith=P.nvds_onnx("monolith"),
        validation=str(validation_path(P.nvds_onnx("monolith"))),
    log:
        P.log("export_nvds", "monolith_{tier}"),
    benchmark:
        P.benchmark("export_nvds", "monolith_{tier}")
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=12000,
    params:
        **NVDS_EXPORT_PARAMS,
        tier=get_tier_size,
        mode="monolith",
    script:
        "../../scripts/export_nvds_onnx.py"
