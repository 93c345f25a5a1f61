# The self-contained demo: a generated sample library and seeded smoke weights.


# Every demo clip converted (run with --configfile demo/config.yaml).
rule demo:
    input:
        get_demo_outputs,


if DEMO:

    # Seeded random DA3 weights in the real hub layout (only where no real file is placed).
    rule smoke_da3_weights:
        output:
            f"{WEIGHTS}/DA3/{{folder}}/model.safetensors",
        log:
            f"{LOGS}/smoke_da3_weights/{{folder}}.log",
        wildcard_constraints:
            folder="Small|Base",
        conda:
            "../../envs/export.yaml"
        script:
            "../../scripts/smoke_weights.py"

    # A seeded random NVDS checkpoint in the real layout (flat state dict, `module.` prefix).
    rule smoke_nvds_weights:
        output:
            nvds_weights(),
        log:
            f"{LOGS}/smoke_nvds_weights.log",
        conda:
            "../../envs/export.yaml"
        params:
            tiny=config["export"]["nvds_architecture"] == "tiny",
        script:
            "../../scripts/smoke_nvds_weights.py"

    # Short generated clips: moving content, one with an audio tone, one not 16:9.
    rule demo_library:
        output:
            [str(path) for path in VIDEOS.values()],
        log:
            f"{LOGS}/demo_library.log",
        conda:
            "../../envs/runtime.yaml"
        script:
            "../../scripts/demo_library.py"
