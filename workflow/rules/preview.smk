# The preview (target `preview`): per video, a few short clips at the current settings and a grid of
# divergence x convergence on a still, for the report; no whole video is converted. A clip that starts
# a depth segment computes that segment's first frames for the full run, which continues after them
# (stereo3d.stages.preview).


# Raw DA3 depth of one clip (and of the frames before it, for a stabiliser that reaches back).
rule preview_depth:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        model=get_da3_model,
    output:
        maps=directory(P.preview_depth),
        lead=directory(P.preview_lead),
    log:
        P.log("preview_depth", "{video}/{dkey}/{seg}"),
    benchmark:
        P.benchmark("preview_depth", "{video}/{dkey}/{seg}")
    conda:
        "../../envs/runtime.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=4000,
    params:
        # the video's DepthSettings (stereo3d.stages.depth): what its depth key names
        depth=get_depth_params,
        segment=get_preview_segment,
        full_depth=get_preview_full_depth,
        lead=get_preview_lead_frames,
    script:
        "../../scripts/preview_depth.py"


# Near maps of one clip, stabilised over the clip.
rule preview_near_maps:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        depth=P.preview_depth,
        lead=P.preview_lead,
        models=get_near_models,
    output:
        maps=directory(P.preview_near),
    log:
        P.log("preview_near_maps", "{video}/{dkey}/{nkey}/{seg}"),
    benchmark:
        P.benchmark("preview_near_maps", "{video}/{dkey}/{nkey}/{seg}")
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
        "../../scripts/preview_near_maps.py"


# One clip in the configured layout at the current render settings, as H.264 MP4 (browsers play it).
rule preview_render:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        near=P.preview_near,
    output:
        clip=P.preview_clip,
    log:
        P.log("preview_render", "{video}/{dkey}/{nkey}/{rkey}/{seg}"),
    benchmark:
        P.benchmark("preview_render", "{video}/{dkey}/{nkey}/{rkey}/{seg}")
    conda:
        "../../envs/runtime.yaml"
    threads: 4
    resources:
        mem_mb=3000,
    params:
        # {dotted key: value}: the video's RenderSettings (stereo3d.stages.render)
        render=T.render_params,
    script:
        "../../scripts/preview_render.py"


# The video's clips on one page of the report (each embedded; Snakemake's report plays no MP4 itself).
rule preview_page:
    input:
        clips=get_preview_page_clips,
    output:
        page=report(
            P.preview_page,
            caption="../report/preview_clips.rst",
            category="Preview",
            subcategory="{video}",
            labels={"video": "{video}", "preview": "clips"},
        ),
    log:
        P.log("preview_page", "{video}/{dkey}/{nkey}/{rkey}"),
    benchmark:
        P.benchmark("preview_page", "{video}/{dkey}/{nkey}/{rkey}")
    conda:
        "../../envs/runtime.yaml"
    params:
        labels=get_preview_page_labels,
    script:
        "../../scripts/preview_page.py"


# Red-cyan anaglyphs of one still of the video at each divergence x convergence of preview.grid.
rule preview_grid:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        near=get_preview_grid_near,
    output:
        grid=report(
            P.preview_grid,
            caption="../report/preview_grid.rst",
            category="Preview",
            subcategory="{video}",
            labels={"video": "{video}", "preview": "settings grid"},
        ),
    log:
        P.log("preview_grid", "{video}/{dkey}/{nkey}"),
    benchmark:
        P.benchmark("preview_grid", "{video}/{dkey}/{nkey}")
    conda:
        "../../envs/runtime.yaml"
    resources:
        mem_mb=2000,
    params:
        grid=config["preview"]["grid"],
        stereo=get_qc_stereo_settings,
        frame=get_preview_grid_frame,
        tile_width=config["report"]["preview_width_px"],
    script:
        "../../scripts/preview_grid.py"
