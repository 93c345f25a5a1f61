# stereo3d: a library of 2D videos → stereoscopic 3D (Depth Anything 3 + NVDS on ONNX Runtime).
#   snakemake --cores all                              convert every video of the library
#   snakemake --cores all exports                      only build the ONNX exports
#   snakemake --cores all --configfile demo/config.yaml demo   the self-contained demo
#   snakemake --cores all preview                      a few short clips and a settings grid per video
#   snakemake --cores 1 prune                          drop intermediates of settings no longer configured
import os

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/inputs.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/video.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/preview.smk"
include: "workflow/rules/prune.smk"


# Every video of the library, converted.
rule all:
    default_target: True
    input:
        get_results,
        get_sidecars,
        get_video_reports,
        T.library_reports(),


# The ONNX exports the configuration asks for, with their validation reports.
rule exports:
    input:
        get_exports,


# A few short clips of every video at the current settings and a settings grid on a still, for the
# report (`snakemake --report report.html preview`): no whole video is converted.
rule preview:
    input:
        get_preview_outputs,


# Videos that could not be converted are rows of the report; say so at the end of the run too.
onsuccess:
    summarise_failures()


onerror:
    summarise_failures()
