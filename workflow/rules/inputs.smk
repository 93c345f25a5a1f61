# Input and param functions of the rules (named get_*, never lambdas in rules): thin wrappers over
# stereo3d.workflow.targets (T) and the segments of common.smk.
import dataclasses

from stereo3d.models.names import parse_da3_onnx_name


def get_source(wildcards):
    # ancient: what says the source changed is its fingerprint (a param of the probe), not its time or path,
    # so a moved or copied library recomputes nothing.
    return ancient(T.library.source(wildcards.video))


def get_fingerprint(wildcards):
    return T.library.fingerprint(wildcards.video)


def get_exports(wildcards):
    return T.exports(converting())


def get_qc_validations(wildcards):
    return T.qc_validations(converting())


def get_results(wildcards):
    return T.results(converting())


def get_sidecars(wildcards):
    return T.sidecars(converting())


def get_current_near_segments(wildcards):
    """Every near-map segment of the video at its current keys."""
    v = wildcards.video
    return segment_paths(P.near_maps, v, dkey=T.depth_key(v), nkey=T.near_key(v))


def get_video_reports(wildcards):
    return T.video_reports(converting())


def get_qc_stats(wildcards):
    return T.qc_stats(converting())


def get_probes(wildcards):
    return T.probes()


def get_failures(wildcards):
    """Each video that cannot be converted, with its one-line reason."""
    return failures()


def get_depth_segments(wildcards):
    """Every depth segment of the video in frame order (requested depth key, else the current)."""
    dkey = getattr(wildcards, "dkey", None) or T.depth_key(wildcards.video)
    return segment_paths(P.depth, wildcards.video, dkey=dkey)


def get_near_plan(wildcards):
    if T.stabiliser(wildcards.video).plan is None:
        return []
    w = wildcards
    return fill(P.near_plan, video=w.video, dkey=w.dkey, nkey=w.nkey)


def get_previous_depth(wildcards):
    """The depth segment before this one, for a stabiliser whose window reaches back."""
    start = int(wildcards.seg.split("-")[0])
    if not T.stabiliser(wildcards.video).history or start == 0:
        return []
    (previous,) = [
        p for p in get_depth_segments(wildcards) if p.endswith(f"-{start:08d}.zarr")
    ]
    return previous


def get_near_models(wildcards):
    return T.near_models(wildcards.video)


def get_depth_params(wildcards, output):
    """The video's DepthSettings (stereo3d.stages.depth), for the rules' params. Derived from the
    output, whose depth key names every field: Snakemake records no params derived from an output (a
    change of them is a new path), so a depth computed before the rules showed them is not redone.
    """
    return T.depth_params(wildcards)


def get_window_near(wildcards):
    """The other segments' near maps within the floating window's reach of this segment (none unless
    render.floating_window is auto)."""
    v, w = wildcards.video, wildcards
    near = T.window_segments(v, w.seg, segments(v), probed(v)["video"]["fps"])
    return [
        fill(P.near_maps, video=v, dkey=w.dkey, nkey=w.nkey, seg=seg) for seg in near
    ]


def get_near_segments(wildcards):
    """Every near-map segment of the video in frame order (the requested keys)."""
    w = wildcards
    return segment_paths(P.near_maps, w.video, dkey=w.dkey, nkey=w.nkey)


def get_convergence_plan(wildcards):
    """The video's convergence plan (render.convergence auto; else nothing)."""
    return T.convergence_plan(wildcards.video, wildcards.dkey, wildcards.nkey)


def get_subtitle_plan(wildcards):
    """The video's subtitle plan (subtitles.burn with a track to draw; else nothing)."""
    w = wildcards
    return T.subtitle_plan(w.video, w.dkey, w.nkey, w.rkey)


def get_convergence_params(wildcards):
    return keys.convergence_params(T.render_settings(wildcards.video).stereo)


def get_qc_convergence_plan(wildcards):
    v = wildcards.video
    return T.convergence_plan(v, T.depth_key(v), T.near_key(v))


def get_render_segments(wildcards):
    v = wildcards.video
    k = dict(dkey=T.depth_key(v), nkey=T.near_key(v), rkey=T.render_key(v))
    return segment_paths(P.render, v, **k)


def get_keep_subtitles(wildcards):
    return bool(T.video(wildcards.video).sections["subtitles"]["keep"])


def get_segment_starts(wildcards):
    return [start for start, _ in segments(wildcards.video)]


def get_da3_model(wildcards):
    s = keys.parse_depth_key(wildcards.dkey)
    return T.da3_export(s["variant"], s["shape"], s["contract"])


def get_da3_export(wildcards):
    """The variant, width, height and contract a DA3 export's file name carries."""
    variant, (width, height), contract = parse_da3_onnx_name(wildcards.stem)
    return {"variant": variant, "width": width, "height": height, "contract": contract}


def get_da3_export_weights(wildcards):
    return T.da3_weights(get_da3_export(wildcards)["variant"])


def get_tier_size(wildcards):
    """(width, height) of an NVDS tier."""
    return [int(side) for side in wildcards.tier.split("x")]


def get_qc_near(wildcards):
    """The video's near-map stores under its current keys, in frame order."""
    v = wildcards.video
    return segment_paths(P.near_maps, v, dkey=T.depth_key(v), nkey=T.near_key(v))


def get_qc_near_settings(wildcards):
    """The video's NearSettings by their dotted config keys (the near range the QC figures read)."""
    return T.near_settings(wildcards.video).params()


def get_qc_stereo_settings(wildcards):
    """The renderer's geometry settings (StereoSettings' fields): what the QC figures and the grid draw with."""
    return dataclasses.asdict(T.video(wildcards.video).stereo())


def get_demo_outputs(wildcards):
    if not DEMO:
        raise WorkflowError(
            "the demo target needs the demo configuration: --configfile demo/config.yaml"
        )
    return get_results(wildcards) + get_sidecars(wildcards)


def get_prune_videos(wildcards):
    """Each video of the library with its current keys (what `prune` keeps), from the probes on disk."""
    return T.prune_keys(shape_on_disk)


def get_preview_outputs(wildcards):
    """Every video's preview clips (current keys) and, when preview.grid has values, its settings grid."""
    outputs = []
    grid = config["preview"]["grid"]
    for v in converting():
        k = dict(video=v, dkey=T.depth_key(v), nkey=T.near_key(v))
        outputs.append(fill(P.preview_page, rkey=T.render_key(v), **k))
        if grid["divergence_pct"] and grid["convergence"]:
            outputs.append(fill(P.preview_grid, **k))
    return outputs


def get_preview_segment(wildcards):
    """[start, count] of the full run's depth segment the clip starts (it computes its first frames), or []."""
    segment = preview_clip(wildcards).segment
    return list(segment) if segment else []


def get_preview_full_depth(wildcards):
    """The full run's store of that segment ("" when the clip starts none)."""
    segment = preview_clip(wildcards).segment
    if not segment:
        return ""
    return fill(
        P.depth, video=wildcards.video, dkey=wildcards.dkey, seg=segment_name(*segment)
    )


def get_preview_lead_frames(wildcards):
    return T.stabiliser(wildcards.video).history


def get_preview_grid_near(wildcards):
    clip, _ = grid_still(preview_clips(wildcards.video))
    return fill(
        P.preview_near,
        video=wildcards.video,
        dkey=wildcards.dkey,
        nkey=wildcards.nkey,
        seg=clip.name,
    )


def get_preview_grid_frame(wildcards):
    return grid_still(preview_clips(wildcards.video))[1]


def get_preview_page_clips(wildcards):
    w = wildcards
    k = dict(video=w.video, dkey=w.dkey, nkey=w.nkey, rkey=w.rkey)
    return [fill(P.preview_clip, seg=c.name, **k) for c in preview_clips(w.video)]


def get_preview_page_labels(wildcards):
    """One line per clip: its frames and times."""
    times = probed(wildcards.video)["video"]
    fps = times["fps"]
    return [
        f"frames {c.start}-{c.start + c.count - 1} ({c.start / fps:.2f}-{(c.start + c.count) / fps:.2f} s)"
        for c in preview_clips(wildcards.video)
    ]
