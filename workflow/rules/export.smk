# Weights → fixed-size ONNX graphs, each with a validation report beside it.


def get_da3_export_weights(wildcards):
    return da3_weights(parse_da3_stem(wildcards.stem)[0])


def parse_da3_stem(stem):
    from stereo3d.export.names import parse_da3_onnx_name

    return parse_da3_onnx_name(stem)


def get_da3_export_params(wildcards):
    variant, size, contract = parse_da3_stem(wildcards.stem)
    return {
        "variant": variant,
        "size": size,
        "contract": contract,
        "opset": config["export"]["da3_opset"],
        "exporter": config["export"]["da3_exporter"],
        "fail_rel_mean_err": config["export"]["fail_rel_mean_err"],
    }


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
        export=get_da3_export_params,
    script:
        "../../scripts/da3_to_onnx.py"
