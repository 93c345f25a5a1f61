# Per video: probe → per segment: depth → near maps → render + encode → join + mux.
# Paths are the templates of stereo3d.workflow.paths (P); input functions are in common.smk.


# Streams, frame count, exact timestamps, size, rotation and colour of one source video. A
# checkpoint: the segments of the video are known once it has run.
checkpoint probe:
    input:
        source=get_source,
    output:
        json=P.probe,
        frames=P.probe_frames,
    log:
        P.log("probe", "{video}"),
    benchmark:
        P.benchmark("probe", "{video}")
    conda:
        "../../envs/runtime.yaml"
    params:
        fingerprint=get_fingerprint,
    script:
        "../../scripts/probe.py"


# Raw DA3 depth of one segment (the depth key names variant, side, contract and fit).
rule depth:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        model=get_da3_model,
    output:
        maps=directory(P.depth),
    log:
        P.log("depth", "{video}/{dkey}/{seg}"),
    benchmark:
        P.benchmark("depth", "{video}/{dkey}/{seg}")
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
    params:
        # the video's DepthSettings (stereo3d.stages.depth): what its depth key names
        depth=get_depth_params,
    script:
        "../../scripts/depth.py"


# A stabiliser's plan over the whole video (EMA: normalisation ranges smoothed, reset at cuts).
rule near_plan:
    input:
        depth=get_depth_segments,
    output:
        plan=P.near_plan,
    log:
        P.log("near_plan", "{video}/{dkey}/{nkey}"),
    benchmark:
        P.benchmark("near_plan", "{video}/{dkey}/{nkey}")
    conda:
        "../../envs/runtime.yaml"
    params:
        # {dotted key: value}: the video's NearSettings (stereo3d.stabilisers.settings)
        near=T.near_params,
    script:
        "../../scripts/near_plan.py"


# The screen plane of every frame (render.convergence: auto): each shot's subject, eased, reset at cuts.
rule convergence_plan:
    input:
        near=get_near_segments,
        depth=get_depth_segments,
        probe=rules.probe.output.json,
    output:
        plan=P.convergence_plan,
    log:
        P.log("convergence_plan", "{video}/{dkey}/{nkey}/{ckey}"),
    benchmark:
        P.benchmark("convergence_plan", "{video}/{dkey}/{nkey}/{ckey}")
    conda:
        "../../envs/runtime.yaml"
    params:
        # {dotted key: value}: the render settings the plan is made with (keys.convergence_params)
        render=get_convergence_params,
    script:
        "../../scripts/convergence_plan.py"


# The cues of the subtitle track burnt in (subtitles.burn): each drawn once, placed in depth over
# the near maps of the frames it is shown on, one depth per cue for every segment.
rule subtitle_plan:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        near=get_near_segments,
        convergence_plan=get_convergence_plan,
    output:
        plan=P.subtitle_plan,
    log:
        P.log("subtitle_plan", "{video}/{dkey}/{nkey}/{rkey}"),
    benchmark:
        P.benchmark("subtitle_plan", "{video}/{dkey}/{nkey}/{rkey}")
    conda:
        "../../envs/runtime.yaml"
    params:
        # {dotted key: value}: the video's RenderSettings (stereo3d.stages.render)
        render=T.render_params,
    script:
        "../../scripts/subtitle_plan.py"


# A text subtitle track beside the result (subtitles.sidecar), every line placed in both eyes at
# the depth of its cues over the near maps.
rule subtitle_sidecar:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        near=get_current_near_segments,
        convergence_plan=get_qc_convergence_plan,
    output:
        P.sidecar,
    log:
        P.log("subtitle_sidecar", "{video}{tag}.{rank}.{language}"),
    benchmark:
        P.benchmark("subtitle_sidecar", "{video}{tag}.{rank}.{language}")
    conda:
        "../../envs/runtime.yaml"
    params:
        sidecar=T.sidecar_params,
    script:
        "../../scripts/subtitle_sidecar.py"


# Near maps (larger = nearer) of one segment, stabilised over time as configured.
rule near_maps:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        depth=P.depth,
        previous_depth=get_previous_depth,
        plan=get_near_plan,
        models=get_near_models,
    output:
        maps=directory(P.near_maps),
    log:
        P.log("near_maps", "{video}/{dkey}/{nkey}/{seg}"),
    benchmark:
        P.benchmark("near_maps", "{video}/{dkey}/{nkey}/{seg}")
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
    params:
        # {dotted key: value}: the video's NearSettings (stereo3d.stabilisers.settings)
        near=T.near_params,
    script:
        "../../scripts/near_maps.py"


# Left/right views of one segment in the configured layout, encoded (video only). Removed once
# joined into the result, unless segments.keep_encoded.
rule render:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        near=P.near_maps,
        # render.floating_window auto, render.fill temporal: the neighbouring segments' near maps within reach
        window_near=get_window_near,
        # render.convergence auto: the video's screen plane per frame
        convergence_plan=get_convergence_plan,
        # subtitles.burn: the cues drawn into both eyes, in depth
        subtitle_plan=get_subtitle_plan,
    output:
        video=P.render if config["segments"]["keep_encoded"] else temp(P.render),
    log:
        P.log("render", "{video}/{dkey}/{nkey}/{rkey}/{seg}"),
    benchmark:
        P.benchmark("render", "{video}/{dkey}/{nkey}/{rkey}/{seg}")
    conda:
        "../../envs/runtime.yaml"
    # The renderer's row slices and the encoder share them (Snakemake lowers it to --cores).
    threads: 4
    resources:
        mem_mb=3000,
    params:
        # {dotted key: value}: the video's RenderSettings (stereo3d.stages.render)
        render=T.render_params,
    script:
        "../../scripts/render.py"


# The finished file: the encoded segments joined without re-encoding, with every
# audio/subtitle/chapter stream of the source.
rule join:
    input:
        segments=get_render_segments,
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
    output:
        P.result,
    log:
        P.log("join", "{video}{tag}.{ext}"),
    benchmark:
        P.benchmark("join", "{video}{tag}.{ext}")
    conda:
        "../../envs/runtime.yaml"
    # The container (encode.container, keys.MUX_ONLY) is the result's extension.
    params:
        starts=get_segment_starts,
        # subtitles.keep: the source's subtitle tracks in the result (a change reruns the mux alone)
        keep_subtitles=get_keep_subtitles,
    script:
        "../../scripts/join.py"
