"""Compare two runs of the same library (run_slurm.sh: the local run and the SLURM one): every output that should
be equal is, and the metadata that holds a run's own paths and file times is compared without them.

    python tests/cluster/compare_runs.py RUN_A RUN_B     (exit status 0: every output equal)

Each file of RUN_A's ``results/``, ``models/`` and ``work/`` is compared with the same path in RUN_B by the first
row of ``KINDS`` that matches it. RUN_B's extra files are reported too. Links (``work/<id>/source.*``, the
sources as the workflow sees them) are inputs, not outputs: skipped.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import sys
from pathlib import Path


def _bytes(path: Path) -> bytes:
    return path.read_bytes()


def _probe(path: Path) -> bytes:
    """probe.json without ``path``: the source's absolute path, which differs between two run folders."""
    probe = json.loads(path.read_text())
    probe.pop("path", None)
    return json.dumps(probe, sort_keys=True).encode()


def _store_metadata(path: Path) -> bytes:
    """A map store node's zarr.json without file times: a group's resume identity names each input file with its
    name, size and modification time (stereo3d.io.resume.file_identity); the times are the run's own."""
    node = json.loads(path.read_text())
    identity = node.get("attributes", {}).get("identity")
    if identity:
        identity["inputs"] = [entry[:2] for entry in identity["inputs"]]
    return json.dumps(node, sort_keys=True).encode()


def _sources(path: Path) -> bytes:
    """.sources.json, the fingerprint cache: keyed by absolute path, with size, time and inode; its fingerprints
    (the last field) are what says a source is the same file. Compared by file name."""
    cache = json.loads(path.read_text())
    return json.dumps({Path(key).name: entry[-1] for key, entry in cache.items()}, sort_keys=True).encode()


# How each file is compared: (pattern on its path relative to the run folder, how, why). The first match decides;
# ``None`` skips the file. fnmatch's "*" also matches "/".
KINDS = (
    ("work/*.zarr/.snakemake_timestamp", None, "Snakemake's mark on a folder output: empty, its time is the point"),
    ("work/*.zarr/zarr.json", _store_metadata, "a map store's group: its attributes, file times left out"),
    ("work/*.zarr/*", _bytes, "a map store's arrays: their metadata and every chunk, byte for byte"),
    ("work/*/probe.json", _probe, "the probe, the source's path left out"),
    ("work/.sources.json", _sources, "the sources' fingerprints, by file name"),
    ("models/*.validation.json", None, "export reports: the export's seconds, errors measured with the job's threads"),
    ("work/qc/exports.html", None, "the table of those reports"),
    ("work/qc/benchmarks.*", None, "the jobs' timings"),
    ("*", _bytes, "results, exports, QC figures and tables, plans, frame times: byte for byte"),
)


def kind_of(relative: str):
    return next((how for pattern, how, _ in KINDS if fnmatch.fnmatchcase(relative, pattern)), None)


def outputs(run: Path) -> list[str]:
    found = (p for top in ("results", "models", "work") for p in (run / top).rglob("*"))
    return sorted(p.relative_to(run).as_posix() for p in found if p.is_file() and not p.is_symlink())


def compare(run_a: Path, run_b: Path) -> int:
    """Print one line per compared file; return how many differ or are missing on either side."""
    ours, theirs = outputs(run_a), set(outputs(run_b))
    differ = 0
    for relative in ours:
        how = kind_of(relative)
        if how is None:
            continue
        a = hashlib.sha256(how(run_a / relative)).hexdigest()[:16]
        b = hashlib.sha256(how(run_b / relative)).hexdigest()[:16] if relative in theirs else "missing"
        differ += a != b
        print(f"{'same   ' if a == b else 'DIFFERS'}  {a:<16} {'' if a == b else b + '  '}{relative}")
    for relative in sorted(theirs - set(ours)):
        if kind_of(relative) is not None:
            differ += 1
            print(f"EXTRA    {relative} (only in {run_b})")
    return differ


def main() -> None:
    run_a, run_b = (Path(arg) for arg in sys.argv[1:3])
    differ = compare(run_a, run_b)
    print(f"== PASS: {run_b} equals {run_a}" if not differ else f"== FAIL: {differ} outputs differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
