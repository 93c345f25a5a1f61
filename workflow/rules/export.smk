# Weights → fixed-size ONNX graphs, each with a validation report beside it.


# DA3 depth-only export of one variant × size × contract (name carries all three).
rule export_da3:
    input:
        weights=get_da3_export_weights,
    output:
        onnx=f"{MODELS}/DA3/{{stem}}.onnx",
        validation=f"{MODELS}/DA3/{{stem}}.onnx.validation.json",
    log:
        f"{LOGS}/export_da3/{{stem}}.log",
    benchmark:
        f"{BENCH}/export_da3/{{stem}}.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=8000,
    params:
        variant=get_da3_variant,
        size=get_da3_size,
        contract=get_da3_contract,
        opset=config["export"]["da3_opset"],
        exporter=config["export"]["da3_exporter"],
        fail_rel_mean_err=config["export"]["fail_rel_mean_err"],
    script:
        "../../scripts/da3_to_onnx.py"


NVDS_EXPORT_PARAMS = dict(
    opset=config["export"]["nvds_opset"],
    fail_max_abs_err=config["export"]["nvds_fail_max_abs_err"],
    tiny=config["export"]["nvds_architecture"] == "tiny",
)


# NVDS split pair at one tier: the backbone (once per frame) and the head (per 4-frame window).
rule export_nvds_split:
    input:
        checkpoint=nvds_weights(),
    output:
        backbone=f"{MODELS}/NVDS/NVDS_Backbone_{{tier}}.onnx",
        head=f"{MODELS}/NVDS/NVDS_Head_{{tier}}.onnx",
        backbone_validation=f"{MODELS}/NVDS/NVDS_Backbone_{{tier}}.onnx.validation.json",
        head_validation=f"{MODELS}/NVDS/NVDS_Head_{{tier}}.onnx.validation.json",
    log:
        f"{LOGS}/export_nvds/split_{{tier}}.log",
    benchmark:
        f"{BENCH}/export_nvds/split_{{tier}}.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=12000,
    params:
        **NVDS_EXPORT_PARAMS,
        width=get_tier_width,
        height=get_tier_height,
        mode="split",
    script:
        "../../scripts/export_nvds_onnx.py"


# NVDS monolith at one tier: one graph over the whole 4-frame window (the fallback).
rule export_nvds_monolith:
    input:
        checkpoint=nvds_weights(),
    output:
        monolith=f"{MODELS}/NVDS/NVDS_Stabilizer_{{tier}}.onnx",
        validation=f"{MODELS}/NVDS/NVDS_Stabilizer_{{tier}}.onnx.validation.json",
    log:
        f"{LOGS}/export_nvds/monolith_{{tier}}.log",
    benchmark:
        f"{BENCH}/export_nvds/monolith_{{tier}}.tsv"
    conda:
        "../../envs/export.yaml"
    resources:
        mem_mb=12000,
    params:
        **NVDS_EXPORT_PARAMS,
        width=get_tier_width,
        height=get_tier_height,
        mode="monolith",
    script:
        "../../scripts/export_nvds_onnx.py"
