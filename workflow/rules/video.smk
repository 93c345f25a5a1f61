# Per video: probe → depth → near maps → render + encode → mux with every source stream.


# Streams, frame count, exact timestamps, size, rotation and colour of one source video.
rule probe:
    input:
        source=get_source,
    output:
        json=f"{WORK}/{{video}}/probe.json",
    log:
        f"{LOGS}/probe/{{video}}.log",
    benchmark:
        f"{BENCH}/probe/{{video}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    script:
        "../../scripts/probe.py"


# Raw DA3 depth of every frame (the path names variant, side, contract and fit).
rule depth:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        model=get_da3_model,
    output:
        maps=f"{WORK}/{{video}}/depth/da3_{{variant}}_{{size}}_{{contract}}_{{fit}}.maps",
    log:
        f"{LOGS}/depth/{{video}}/da3_{{variant}}_{{size}}_{{contract}}_{{fit}}.log",
    benchmark:
        f"{BENCH}/depth/{{video}}/da3_{{variant}}_{{size}}_{{contract}}_{{fit}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
    script:
        "../../scripts/depth.py"


# Near maps (larger = nearer) from raw depth, stabilised over time as configured.
rule near_maps:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        depth=f"{WORK}/{{video}}/depth/{{dkey}}.maps",
        nvds=get_near_models,
    output:
        maps=f"{WORK}/{{video}}/near/{{dkey}}/{{nkey}}.maps",
    log:
        f"{LOGS}/near_maps/{{video}}/{{dkey}}/{{nkey}}.log",
    benchmark:
        f"{BENCH}/near_maps/{{video}}/{{dkey}}/{{nkey}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
    params:
        near=get_near_params,
    script:
        "../../scripts/near_maps.py"


# Left/right views in the configured layout, encoded (video only).
rule render:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        near=f"{WORK}/{{video}}/near/{{dkey}}/{{nkey}}.maps",
    output:
        video=f"{WORK}/{{video}}/render/{{dkey}}/{{nkey}}/{{rkey}}.mkv",
    log:
        f"{LOGS}/render/{{video}}/{{dkey}}/{{nkey}}/{{rkey}}.log",
    benchmark:
        f"{BENCH}/render/{{video}}/{{dkey}}/{{nkey}}/{{rkey}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        mem_mb=3000,
    params:
        render=get_render_params,
    script:
        "../../scripts/render.py"


# The finished file: stereo video + every audio/subtitle/chapter stream of the source.
rule mux:
    input:
        video=get_render_input,
        source=get_source,
        probe=rules.probe.output.json,
    output:
        f"{RESULTS}/{{video}}/{{video}}{{tag}}.mp4",
    log:
        f"{LOGS}/mux/{{video}}{{tag}}.log",
    benchmark:
        f"{BENCH}/mux/{{video}}{{tag}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    script:
        "../../scripts/mux.py"
