# Quality control for `snakemake --report report.html`: per-video figures and library tables.
# Input functions (common.smk): get_qc_depth, get_qc_near, get_qc_near_settings, get_qc_render_settings,
# get_qc_validations, get_qc_stats, get_final_outputs.


# Contact sheet, flicker and parallax/comfort figures of one video, and their numbers (stats.json).
rule qc_video:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        depth=get_qc_depth,
        near=get_qc_near,
    output:
        contact_sheet=report(
            f"{WORK}/{{video}}/qc/contact_sheet.png",
            caption="../report/contact_sheet.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "contact sheet"},
        ),
        flicker=report(
            f"{WORK}/{{video}}/qc/flicker.png",
            caption="../report/flicker.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "flicker"},
        ),
        parallax=report(
            f"{WORK}/{{video}}/qc/parallax.png",
            caption="../report/parallax.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "parallax and comfort"},
        ),
        stats=f"{WORK}/{{video}}/qc/stats.json",
    log:
        f"{LOGS}/qc_video/{{video}}.log",
    benchmark:
        f"{BENCH}/qc_video/{{video}}.tsv"
    conda:
        "../../envs/runtime.yaml"
    resources:
        mem_mb=2000,
    params:
        near=get_qc_near_settings,
        render=get_qc_render_settings,
        comfort_limit_pct=config["report"]["comfort_limit_pct"],
        rows=config["report"]["contact_sheet_rows"],
        tile_width=config["report"]["preview_width_px"],
    script:
        "../../scripts/report_video.py"


# The validation reports of every export the library uses, as one table.
rule qc_exports:
    input:
        validations=get_qc_validations,
    output:
        table=report(
            f"{WORK}/qc/exports.html",
            caption="../report/exports.rst",
            category="Library",
            labels={"table": "export validation"},
        ),
    log:
        f"{LOGS}/qc_exports.log",
    conda:
        "../../envs/runtime.yaml"
    script:
        "../../scripts/report_exports.py"


# Per-video QC numbers and the rules' benchmarks, once every video is finished.
rule qc_library:
    input:
        stats=get_qc_stats,
        finished=get_final_outputs(),
    output:
        videos=report(
            f"{WORK}/qc/videos.html",
            caption="../report/videos.rst",
            category="Library",
            labels={"table": "videos: flicker and comfort"},
        ),
        benchmarks=report(
            f"{WORK}/qc/benchmarks.html",
            caption="../report/benchmarks.rst",
            category="Library",
            labels={"table": "benchmarks"},
        ),
        benchmarks_csv=f"{WORK}/qc/benchmarks.csv",
    log:
        f"{LOGS}/qc_library.log",
    conda:
        "../../envs/runtime.yaml"
    params:
        benchmarks=BENCH,
    script:
        "../../scripts/report_library.py"
