"""Stereo rendering and encoding of one segment (rule render)."""

from stereo3d.stages.probe import load_probe
from stereo3d.stages.render import EncodeSettings, render_video
from stereo3d.stereo.layouts import layout_options
from stereo3d.stereo.warp import Renderer, StereoSettings
from stereo3d.workflow.keys import parse_depth_key, section_of
from stereo3d.workflow.scripting import bad_source_record, render_device_id, run_guarded, setup_logging, source_of


def main():
    settings = snakemake.params.render  # stereo3d.workflow.keys.render_settings: {dotted key: value}
    render, encode = section_of(settings, "render"), section_of(settings, "encode")
    # The device is a speed setting: read from config, not params, so it triggers no rerun.
    runtime = snakemake.config["runtime"]
    renderer = Renderer(runtime["render_device"], render_device_id(runtime), threads=snakemake.threads)
    render_video(
        video=source_of(snakemake),
        probe=load_probe(snakemake.input.probe, snakemake.input.frames),
        near=snakemake.input.near,
        out=snakemake.output.video,
        stereo=StereoSettings.from_config(render),
        layout=render["layout"],
        encode=EncodeSettings.from_config(encode),
        **layout_options(render["layout"], render),
        renderer=renderer,
        window_near=list(snakemake.input.window_near),
        # The picture area the near maps cover (baked-in bars) is named by the depth key they are stored under.
        picture=parse_depth_key(snakemake.wildcards.dkey)["picture"],
        bars=render.get("bars", "keep"),  # a setting of a video with bars only (keys.BARS_KEYS)
    )


setup_logging(snakemake.log[0])
run_guarded(main, bad_source_record(snakemake))
