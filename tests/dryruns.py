"""Many dry runs of one work folder in one process: Snakemake's own start (about 2 s of imports on two cores)
is paid once instead of once per dry run. Each run is the same command line as harness.snakemake_cmd's, with its
own config file; the Snakefile is read afresh every time, as a new process would.

Run by harness.planned_jobs_each as ``python dryruns.py WORKDIR CONFIG...``: for every config file it prints a
line ``@@ start CONFIG``, Snakemake's output (stderr joined to stdout by the caller), and ``@@ exit CODE``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from snakemake.cli import main as snakemake_main

SNAKEFILE = Path(__file__).resolve().parents[1] / "Snakefile"


def dry_runs(workdir: str, configs: list[str]) -> None:
    for config in configs:
        print(f"@@ start {config}", flush=True)
        argv = ["--snakefile", str(SNAKEFILE), "--directory", workdir, f"--configfile={config}", "--cores", "2", "-n"]
        try:
            snakemake_main(argv)
            code = 0
        except SystemExit as exit:
            code = exit.code
        sys.stdout.flush()
        sys.stderr.flush()
        print(f"@@ exit {code}", flush=True)


if __name__ == "__main__":
    dry_runs(sys.argv[1], sys.argv[2:])
