# Housekeeping: `snakemake prune` drops intermediates of settings no longer configured.


# Keeps what the current settings read (stereo3d.workflow.prune); runs only when named.
rule prune:
    log:
        P.log("prune", "library"),
    benchmark:
        P.benchmark("prune", "library")
    localrule: True
    conda:
        "../../envs/runtime.yaml"
    params:
        videos=get_prune_videos,
        segment_frames=config["segments"]["frames"],
    script:
        "../../scripts/prune.py"
