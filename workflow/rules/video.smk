# Per video: probe → per segment: depth → near maps → render + encode → join + mux.


# Streams, frame count, exact timestamps, size, rotation and colour of one source video. A
# checkpoint: the segments of the video are known once it has run.
checkpoint probe:
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


# Raw DA3 depth of one segment (the path names variant, side, contract, fit and frame range).
rule depth:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        model=get_da3_model,
    output:
        maps=f"{WORK}/{{video}}/depth/da3_{{variant}}_{{size}}_{{contract}}_{{fit}}/{{seg}}.maps",
    log:
        f"{LOGS}/depth/{{video}}/da3_{{variant}}_{{size}}_{{contract}}_{{fit}}/{{seg}}.log",
    benchmark:
        f"{BENCH}/depth/{{video}}/da3_{{variant}}_{{size}}_{{contract}}_{{fit}}/{{seg}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
    script:
        "../../scripts/depth.py"


# EMA only: normalisation ranges over the whole video, smoothed and reset at shot cuts.
rule ema_plan:
    input:
        depth=get_plan_depths,
    output:
        plan=f"{WORK}/{{video}}/near/{{dkey}}/{{nkey}}/plan.npz",
    log:
        f"{LOGS}/ema_plan/{{video}}/{{dkey}}/{{nkey}}.log",
    benchmark:
        f"{BENCH}/ema_plan/{{video}}/{{dkey}}/{{nkey}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    params:
        near=get_near_params,
    script:
        "../../scripts/ema_plan.py"


# Near maps (larger = nearer) of one segment, stabilised over time as configured.
rule near_maps:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        depth=f"{WORK}/{{video}}/depth/{{dkey}}/{{seg}}.maps",
        previous_depth=get_previous_depth,
        plan=get_near_plan,
        nvds=get_near_models,
    output:
        maps=f"{WORK}/{{video}}/near/{{dkey}}/{{nkey}}/{{seg}}.maps",
    log:
        f"{LOGS}/near_maps/{{video}}/{{dkey}}/{{nkey}}/{{seg}}.log",
    benchmark:
        f"{BENCH}/near_maps/{{video}}/{{dkey}}/{{nkey}}/{{seg}}.tsv"
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


# Left/right views of one segment in the configured layout, encoded (video only).
rule render:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        near=f"{WORK}/{{video}}/near/{{dkey}}/{{nkey}}/{{seg}}.maps",
    output:
        video=f"{WORK}/{{video}}/render/{{dkey}}/{{nkey}}/{{rkey}}/{{seg}}.mkv",
    log:
        f"{LOGS}/render/{{video}}/{{dkey}}/{{nkey}}/{{rkey}}/{{seg}}.log",
    benchmark:
        f"{BENCH}/render/{{video}}/{{dkey}}/{{nkey}}/{{rkey}}/{{seg}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    # The renderer's row slices and the encoder share them (Snakemake lowers it to --cores).
    threads: 4
    resources:
        mem_mb=3000,
    params:
        render=get_render_params,
    script:
        "../../scripts/render.py"


# The finished file: the encoded segments joined without re-encoding, with every
# audio/subtitle/chapter stream of the source.
rule join:
    input:
        segments=get_render_segments,
        source=get_source,
        probe=rules.probe.output.json,
    output:
        f"{RESULTS}/{{video}}/{{video}}{{tag}}.mp4",
    log:
        f"{LOGS}/join/{{video}}{{tag}}.log",
    benchmark:
        f"{BENCH}/join/{{video}}{{tag}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    params:
        starts=get_segment_starts,
    script:
        "../../scripts/join.py"
