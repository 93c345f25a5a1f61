"""QC tables for the library, as small self-contained HTML pages (and a CSV): every export's validation report,
one row per video from its stats, and a summary of the rules' ``benchmark:`` files."""

from __future__ import annotations

import csv
import html
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from stereo3d.io.atomic import atomic_output

log = logging.getLogger(__name__)

VALIDATION_COLUMNS = (
    ("model", "model"), ("opset", "opset"), ("contract / mode", "contract|mode"), ("size / tier", "size|tier"),
    ("max abs err", "max_abs_err"), ("mean abs err", "mean_abs_err"), ("rel mean err", "rel_mean_err"),
    ("validated", "validated|onnx_checker"), ("providers", "providers"), ("export s", "export_seconds"),
    ("MB", "file_bytes"), ("smoke weights", "smoke"), ("weights sha256", "weights_sha256"),
)  # fmt: skip


def validation_table(paths: Sequence[str | Path], out: str | Path) -> list[dict]:
    """One row per export validation JSON (``<model>.onnx.validation.json``), as an HTML page."""
    rows = []
    for path in sorted(map(Path, paths)):
        data = json.loads(path.read_text())
        errors = data.get("onnx_vs_pytorch", {})  # NVDS nests its errors; DA3 keeps them at the top
        row = {"file": path.name.removesuffix(".validation.json")}
        for title, keys in VALIDATION_COLUMNS:
            value = next((src[k] for k in keys.split("|") for src in (data, errors) if k in src), None)
            row[title] = value
        if row["model"] is None:
            row["model"] = "nvds" if row["file"].startswith("NVDS_") else None
        if "width" in data and "height" in data:  # a DA3 export's shape (its aspect tier), as NVDS tiers read
            row["size / tier"] = f"{data['width']}x{data['height']}"
        rows.append(row)
    for row in rows:
        if isinstance(row["MB"], int | float):
            row["MB"] = row["MB"] / 1e6
        if isinstance(row["weights sha256"], str):
            row["weights sha256"] = row["weights sha256"][:12]
        if isinstance(row["providers"], list):
            row["providers"] = ", ".join(p.removesuffix("ExecutionProvider") for p in row["providers"])
    note = (
        "ONNX Runtime against PyTorch on the same inputs, from each export's validation report. "
        "<b>smoke weights</b>: seeded random weights of the demo (meaningless depth)."
    )
    _write_html(out, "Export validation", [("Exports", note, rows)])
    return rows


BENCH_FIELDS = ("s", "max_rss", "cpu_time", "mean_load", "io_in", "io_out")


def benchmark_table(bench_dir: str | Path, out: str | Path, csv_out: str | Path | None = None) -> list[dict]:
    """Summary of every ``benchmark:`` TSV under ``bench_dir`` (``<rule>/<job...>.tsv``): per rule and per job."""
    bench_dir = Path(bench_dir)
    jobs = []
    for path in sorted(bench_dir.rglob("*.tsv")):
        parts = path.relative_to(bench_dir).with_suffix("").parts
        values = _read_benchmark(path)
        if values is None:
            log.warning("%s: not a Snakemake benchmark table; skipped", path)
            continue
        jobs.append({"rule": parts[0], "job": "/".join(parts[1:]) or parts[0], **values})
    rules = []
    for rule in sorted({j["rule"] for j in jobs}):
        mine = [j for j in jobs if j["rule"] == rule]
        seconds = [j["s"] for j in mine]
        rules.append({"rule": rule, "jobs": len(mine), "total s": sum(seconds), "mean s": sum(seconds) / len(mine),
                      "max s": max(seconds), "max RSS MB": max(j["max_rss"] for j in mine),
                      "CPU s": sum(j["cpu_time"] for j in mine)})  # fmt: skip
    job_rows = [{"rule": j["rule"], "job": j["job"], "s": j["s"], "max RSS MB": j["max_rss"],
                 "CPU s": j["cpu_time"], "mean load %": j["mean_load"]} for j in jobs]  # fmt: skip
    note = (
        f"From the rules' <code>benchmark:</code> files under <code>{html.escape(str(bench_dir))}</code> "
        "(wall-clock s, peak resident memory, CPU time; the mean of repeats where a job ran several)."
    )
    _write_html(out, "Benchmarks", [("Per rule", note, rules), ("Per job", "", job_rows)])
    if csv_out:
        _write_csv(csv_out, job_rows)
    return rules


def library_table(
    stats_paths: Sequence[str | Path], out: str | Path, failures: dict[str, str] | None = None
) -> list[dict]:
    """One row per video from the per-video ``stats.json``: flicker and parallax/comfort at a glance; and one row
    per video that could not be converted (``failures``: video id → the one-line reason)."""
    rows = []
    for path in sorted(map(Path, stats_paths)):
        s = json.loads(path.read_text())
        p, f, c = s["parallax_pct"], s["flicker"], s["comfort"]
        w = s.get("window") or {}  # stats written before window violations were measured have none
        rows.append({"video": s["video"], "frames": s["frames"], "duration s": s["duration_s"],
                     "flicker raw": f["raw_mean"], "flicker stabilised": f["stabilised_mean"],
                     "stabilised / raw": f["ratio"], "parallax p1 %": p["p1"], "p50 %": p["p50"],
                     "p99 %": p["p99"], f"frames beyond ±{c['limit_pct']:g} %": c["beyond_pct"],
                     "window violations %": w.get("violation_pct"), "worst at edge %": w.get("worst_pct"),
                     "after floating window %": w.get("after_window_pct") if w.get("floating_window") == "auto"
                     else None})  # fmt: skip
    note = (
        "Flicker: mean |&Delta;near| between consecutive frames (0..1 maps). Parallax: screen parallax in % of "
        "the frame width over every pixel of every frame (+ = in front of the screen). A frame is beyond the "
        "comfort limit when its 1st or 99th parallax percentile exceeds it in magnitude. Window violations: the "
        "share of frames with content in front of the screen cut by the left or right frame edge (see each "
        "video's stats.json, window.rule), the worst such parallax in % of the width, and the share left with "
        "render.floating_window: auto."
    )
    failed = [{"video": video, "reason": reason} for video, reason in sorted((failures or {}).items())]
    failed_note = (
        "Each is left out until its file changes (delete <code>work/&lt;video&gt;/failed.json</code> to try again)."
    )
    _write_html(out, "Videos", [("Library", note, rows), ("Not converted", failed_note, failed)])
    return rows + failed


def _read_benchmark(path: Path) -> dict | None:
    with path.open(newline="") as handle:
        records = list(csv.DictReader(handle, delimiter="\t"))
    if not records or "s" not in records[0]:
        return None
    values = {}
    for name in BENCH_FIELDS:
        numbers = [_number(r.get(name)) for r in records]
        numbers = [n for n in numbers if n is not None]
        values[name] = sum(numbers) / len(numbers) if numbers else 0.0
    return values


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _cell(value) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != 0 and abs(value) < 1e-2:
            return f"{value:.3g}"
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return html.escape(str(value))


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title><style>
body {{ font-family: system-ui, sans-serif; margin: 1em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f0f0f0; }} td:first-child, th:first-child {{ text-align: left; }}
p.note {{ color: #555; max-width: 60em; }}
</style></head><body>
<h2>{title}</h2>
{sections}
</body></html>
"""


def _write_html(out: str | Path, title: str, sections: Sequence[tuple[str, str, list[dict]]]) -> None:
    parts = []
    for heading, note, rows in sections:
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        if note:
            parts.append(f'<p class="note">{note}</p>')
        if not rows:
            parts.append("<p>(none)</p>")
            continue
        columns = list(rows[0])
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>\n" for r in rows)
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>")
    with atomic_output(out) as tmp:
        tmp.write_text(PAGE.format(title=html.escape(title), sections="\n".join(parts)), encoding="utf-8")


def _write_csv(out: str | Path, rows: list[dict]) -> None:
    with atomic_output(out) as tmp, tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["rule"], delimiter=",")
        writer.writeheader()
        writer.writerows(rows)
