# The self-contained demo: a generated sample library and seeded smoke weights.
from stereo3d.models.names import DA3_VARIANTS, da3_weights_folder


# Every demo clip converted (run with --configfile demo/config.yaml).
rule demo:
    input:
        get_demo_outputs,


if DEMO:

    # Seeded random DA3 weights in the real hub layout (only where no real file is placed).
    rule smoke_da3_weights:
        output:
            P.da3_weights,
        log:
            P.log("smoke_da3_weights", "{folder}"),
        benchmark:
            P.benchmark("smoke_da3_weights", "{folder}")
        wildcard_constraints:
            folder="|".join(map(da3_weights_folder, DA3_VARIANTS)),
        conda:
            "../../envs/export.yaml"
        script:
            "../../scripts/smoke_da3_weights.py"

    # A seeded random NVDS checkpoint in the real layout (flat state dict, `module.` prefix).
    rule smoke_nvds_weights:
        output:
            P.nvds_weights,
        log:
            P.log("smoke_nvds_weights", "NVDS_Stabilizer"),
        benchmark:
            P.benchmark("smoke_nvds_weights", "NVDS_Stabilizer")
        conda:
            "../../envs/export.yaml"
        params:
            tiny=config["export"]["nvds_architecture"] == "tiny",
        script:
            "../../scripts/smoke_nvds_weights.py"

    # Short generated clips: moving content, one with an audio tone, one not 16:9.
    rule demo_library:
        output:
            [str(path) for path in T.videos.values()],
        log:
            P.log("demo_library", "library"),
        benchmark:
            P.benchmark("demo_library", "library")
        conda:
            "../../envs/runtime.yaml"
        script:
            "../../scripts/demo_library.py"
