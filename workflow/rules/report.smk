# Quality control for `snakemake --report report.html`: per-video figures and library tables.


# Contact sheet, flicker and parallax/comfort figures of one video, and their numbers (stats.json).
rule qc_video:
    input:
        source=get_source,
        probe=rules.probe.output.json,
        frames=rules.probe.output.frames,
        depth=get_depth_segments,
        near=get_qc_near,
        convergence_plan=get_qc_convergence_plan,
    output:
        contact_sheet=report(
            fill(P.qc_video, video="{video}", name="contact_sheet.png"),
            caption="../report/contact_sheet.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "contact sheet"},
        ),
        flicker=report(
            fill(P.qc_video, video="{video}", name="flicker.png"),
            caption="../report/flicker.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "flicker"},
        ),
        parallax=report(
            fill(P.qc_video, video="{video}", name="parallax.png"),
            caption="../report/parallax.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "parallax and comfort"},
        ),
        convergence=report(
            fill(P.qc_video, video="{video}", name="convergence.png"),
            caption="../report/convergence.rst",
            category="Videos",
            subcategory="{video}",
            labels={"video": "{video}", "figure": "screen plane"},
        ),
        stats=fill(P.qc_video, video="{video}", name="stats.json"),
    log:
        P.log("qc_video", "{video}"),
    benchmark:
        P.benchmark("qc_video", "{video}")
    conda:
        "../../envs/runtime.yaml"
    resources:
        mem_mb=2000,
    params:
        near=get_qc_near_settings,
        render=get_qc_stereo_settings,
        comfort_limit_pct=config["report"]["comfort_limit_pct"],
        rows=config["report"]["contact_sheet_rows"],
        tile_width=config["report"]["preview_width_px"],
    script:
        "../../scripts/qc_video.py"


# The validation reports of every export the library uses, as one table.
rule qc_exports:
    input:
        validations=get_qc_validations,
    output:
        table=report(
            fill(P.qc_library, name="exports.html"),
            caption="../report/exports.rst",
            category="Library",
            labels={"table": "export validation"},
        ),
    log:
        P.log("qc_exports", "library"),
    benchmark:
        P.benchmark("qc_exports", "library")
    conda:
        "../../envs/runtime.yaml"
    script:
        "../../scripts/qc_exports.py"


# Per-video QC numbers (failed videos with their reason) and the rules' benchmarks.
rule qc_library:
    input:
        stats=get_qc_stats,
        finished=get_results,
        probes=get_probes,
    output:
        videos=report(
            fill(P.qc_library, name="videos.html"),
            caption="../report/videos.rst",
            category="Library",
            labels={"table": "videos: flicker and comfort"},
        ),
        benchmarks=report(
            fill(P.qc_library, name="benchmarks.html"),
            caption="../report/benchmarks.rst",
            category="Library",
            labels={"table": "benchmarks"},
        ),
        benchmarks_csv=fill(P.qc_library, name="benchmarks.csv"),
    log:
        P.log("qc_library", "library"),
    benchmark:
        P.benchmark("qc_library", "library")
    conda:
        "../../envs/runtime.yaml"
    params:
        benchmarks=P.benchmarks,
        failures=get_failures,
    script:
        "../../scripts/qc_library.py"
