"""The video sheet: an optional TSV/CSV listing videos of the library with per-video overrides.

One row per video. The ``video`` column names a file of the library (its path relative to the
library folder, or its id); every other column is a dotted config key of a per-video section
(``render.divergence_pct``, ``render.layout``, ``stabilise.method``, ``da3.variant``...). An empty
cell keeps the config's value. Each video's settings are the config with its row laid over it and
are validated by the same schema as config.yaml, so a bad cell is refused with the same words, plus
the sheet's name, the row and the column.

Everything here runs when the Snakefile is parsed: a bad sheet stops the run before any job.
"""

from __future__ import annotations

import copy
import csv
import difflib
from pathlib import Path
from typing import Any

from stereo3d.errors import BadConfig
from stereo3d.workflow.config import check_semantics, coerce_strings
from stereo3d.workflow.library import video_id

# The config sections a video may override: the ones whose settings shape that video's bytes.
# Exports, paths, segments and the runtime are the library's, not a video's.
PER_VIDEO_SECTIONS = ("da3", "stabilise", "near", "render", "encode", "subtitles")
VIDEO_COLUMN = "video"


def read_sheet(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """``(line number, {column: cell})`` per row; ``.csv`` is comma-separated, anything else tabs.

    Blank lines and lines starting with ``#`` are skipped; cells are stripped of surrounding spaces.
    """
    path = Path(path)
    if not path.is_file():
        raise BadConfig(path, "video sheet not found (library.sheet in config.yaml)")
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM from spreadsheet programs is not a column name
    except UnicodeDecodeError as exc:
        raise BadConfig(path, f"video sheet is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]  # fmt: skip
    if not lines:
        raise BadConfig(path, "video sheet is empty (it needs a header row with a 'video' column)")
    rows = list(csv.reader([line for _, line in lines], delimiter=delimiter))
    header = [cell.strip() for cell in rows[0]]
    if VIDEO_COLUMN not in header:
        sep = "commas" if delimiter == "," else "tabs"
        raise BadConfig(path, f"header has no 'video' column (found {header}; columns are separated by {sep})")
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise BadConfig(path, f"column {duplicated[0]!r} appears twice in the header")
    out = []
    for (number, _), cells in zip(lines[1:], rows[1:]):
        if len(cells) > len(header):
            raise BadConfig(path, f"line {number}: {len(cells)} cells for {len(header)} columns")
        out.append((number, {c: v.strip() for c, v in zip(header, cells)}))
    return out


def per_video_settings(
    config: dict,
    schema: dict,
    sheet_schema: dict,
    sheet_path: str | Path | None,
    library: dict[str, Path],
    folder: str | Path,
) -> tuple[dict[str, dict], dict[str, Path]]:
    """Each video's effective per-video sections, and the videos to convert.

    ``config`` is the validated config (defaults filled) and ``schema`` its schema; ``sheet_schema``
    says what a row may hold (workflow/schemas/sheet.schema.yaml). ``library`` maps id → path as
    discovered. Without a sheet every video gets the config's sections. With ``library.sheet_only``
    only the sheet's videos are converted.
    """
    base = {section: config[section] for section in PER_VIDEO_SECTIONS}
    if not sheet_path:
        return {vid: base for vid in library}, library
    sheet_path = Path(sheet_path)
    rows = read_sheet(sheet_path)
    settings: dict[str, dict] = {}
    seen: dict[str, int] = {}
    row_validator = _validator(sheet_schema)
    for number, row in rows:
        where = f"line {number}"
        vid = _resolve(row.get(VIDEO_COLUMN, ""), library, Path(folder), sheet_path, where)
        problem = next(iter(sorted(row_validator.iter_errors(row), key=lambda e: e.message)), None)
        if problem is not None:
            raise BadConfig(sheet_path, f"{where}: {problem.message}")
        if vid in seen:
            raise BadConfig(sheet_path, f"{where}: video {row[VIDEO_COLUMN]!r} is already listed on line {seen[vid]}")
        seen[vid] = number
        settings[vid] = _overlay(config, schema, base, row, sheet_path, f"{where} ({row[VIDEO_COLUMN]})")
    videos = library
    if config["library"]["sheet_only"]:
        videos = {vid: path for vid, path in library.items() if vid in settings}
    return {vid: settings.get(vid, base) for vid in videos}, videos


def _resolve(name: str, library: dict[str, Path], folder: Path, sheet: Path, where: str) -> str:
    """The id of the video a row names: an id, or a path relative to the library folder (or inside it)."""
    if not name:
        raise BadConfig(sheet, f"{where}: the 'video' cell is empty")
    if name in library:
        return name
    path = Path(name)
    if path.is_absolute():
        try:
            path = path.relative_to(folder.resolve())
        except ValueError:
            raise BadConfig(sheet, f"{where}: {name!r} is not inside the library folder {folder}") from None
    vid = video_id(path)
    if vid in library:
        return vid
    raise BadConfig(sheet, f"{where}: video {name!r} is not in the library folder {folder} "
                           "(name a file relative to it, or its id)")  # fmt: skip


def _validator(schema: dict):
    import jsonschema

    return jsonschema.Draft202012Validator(schema)


def _overlay(config: dict, schema: dict, base: dict, row: dict[str, str], sheet: Path, where: str) -> dict:
    sections = copy.deepcopy(base)
    props = schema["properties"]
    for column, cell in row.items():
        if column == VIDEO_COLUMN or cell == "":
            continue
        section, _, key = column.partition(".")
        if section not in PER_VIDEO_SECTIONS or key not in props[section]["properties"]:
            raise BadConfig(sheet, f"column {column!r} is not a per-video setting{_suggest(column, props)}")
        sections[section][key] = coerce_strings(cell, props[section]["properties"][key])
    merged = {**config, **sections}
    errors = sorted(_validator(schema).iter_errors(merged), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        key = ".".join(str(p) for p in first.absolute_path)
        raise BadConfig(sheet, f"{where}: {key}: {first.message}")
    try:
        check_semantics(merged, sheet)
    except BadConfig as exc:
        raise BadConfig(sheet, f"{where}: {exc.cause}") from None
    return sections


def _suggest(column: str, props: dict[str, Any]) -> str:
    known = [f"{s}.{k}" for s in PER_VIDEO_SECTIONS for k in props[s]["properties"]]
    close = difflib.get_close_matches(column, known, n=1)
    return f" (did you mean {close[0]}?)" if close else f"; per-video columns are {', '.join(PER_VIDEO_SECTIONS)}.<key>"
