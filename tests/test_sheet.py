"""The video sheet: per-video overrides laid over config.yaml, checked like config.yaml, one line per problem.

(The reruns a sheet row causes, for its video only, are tested with real runs in test_segments.py.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from harness import snakemake, write_config

from stereo3d.demo.samples import make_clip
from stereo3d.errors import BadConfig
from stereo3d.stereo.layouts import LAYOUT_TAGS
from stereo3d.workflow.config import load_schema, validate_config
from stereo3d.workflow.library import video_id
from stereo3d.workflow.sheet import per_video_settings, read_sheet

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "workflow/schemas/config.schema.yaml")
SHEET_SCHEMA = load_schema(ROOT / "workflow/schemas/sheet.schema.yaml")
NAMES = ["beach.mp4", "Holidays/été 2024.mkv", "concert, live.mov"]


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "videos"


@pytest.fixture
def library(folder) -> dict[str, Path]:
    return {video_id(name): folder / name for name in NAMES}


def settings(tmp_path, folder, library, text: str, name: str = "videos.tsv", **library_options):
    sheet = tmp_path / name
    sheet.write_text(text, encoding="utf-8")
    config, _ = validate_config({"library": {"folder": str(folder), "sheet": str(sheet), **library_options}}, SCHEMA)
    return per_video_settings(config, SCHEMA, SHEET_SCHEMA, sheet, library, folder)


def test_a_row_overrides_its_video_only_and_empty_cells_keep_the_config(tmp_path, folder, library):
    per_video, videos = settings(tmp_path, folder, library,
                                 "video\trender.layout\trender.divergence_pct\tstabilise.method\tda3.size\n"
                                 "beach.mp4\thalf_sbs\t3.5\t\t\n"
                                 "# a comment line, then a blank one\n\n"
                                 "Holidays/été 2024.mkv\t\t\tframe\t280\n")  # fmt: skip
    assert videos == library
    beach, summer, concert = (per_video[video_id(n)] for n in NAMES)
    assert beach["render"]["layout"] == "half_sbs" and beach["render"]["divergence_pct"] == 3.5
    assert beach["stabilise"]["method"] == "ema" and beach["da3"]["size"] == 518  # empty cells
    assert summer["stabilise"]["method"] == "frame" and summer["da3"]["size"] == 280  # typed from the text
    assert summer["render"]["layout"] == "full_sbs"
    assert concert["render"] == beach["render"] | {"layout": "full_sbs", "divergence_pct": 2.0}  # no row: config


def test_csv_rows_may_name_a_video_by_its_id_and_quote_commas(tmp_path, folder, library):
    summer = video_id("Holidays/été 2024.mkv")
    per_video, _ = settings(tmp_path, folder, library,
                            "\ufeffvideo,render.layout,encode.crf\n"
                            f"{summer},half_tb,20\n"
                            '"concert, live.mov", cross_eyed , \n', name="videos.csv")  # fmt: skip
    assert per_video[summer]["render"]["layout"] == "half_tb" and per_video[summer]["encode"]["crf"] == 20
    assert per_video[video_id("concert, live.mov")]["render"]["layout"] == "cross_eyed"


def test_sheet_only_converts_just_the_listed_videos(tmp_path, folder, library):
    per_video, videos = settings(tmp_path, folder, library, "video\nconcert, live.mov\n", sheet_only=True)
    assert list(videos) == [video_id("concert, live.mov")] and list(per_video) == list(videos)


BAD = [
    (
        "video\trender.divergence_pct\nbeach.mp4\tstrong\n",
        "line 2 (beach.mp4): render.divergence_pct: 'strong' is not of type 'number'",
    ),
    (
        "video\trender.layout\nbeach.mp4\tside_by_side\n",
        "line 2 (beach.mp4): render.layout: 'side_by_side' is not one of",
    ),
    ("video\tda3.size\nbeach.mp4\t500\n", "line 2 (beach.mp4): da3.size: 500 is not a multiple of 14"),
    (
        "video\trender.divergense_pct\nbeach.mp4\t3\n",
        "column 'render.divergense_pct' is not a per-video setting (did you mean render.divergence_pct?)",
    ),
    ("video\truntime.threads\nbeach.mp4\t3\n", "column 'runtime.threads' is not a per-video setting"),
    ("video\trender.layout\nholiday.mp4\thalf_sbs\n", "line 2: video 'holiday.mp4' is not in the library folder"),
    ("video\nbeach.mp4\nbeach\n", "line 3: video 'beach' is already listed on line 2"),
    ("name\trender.layout\nbeach.mp4\thalf_sbs\n", "header has no 'video' column"),
    ("video\trender.layout\nbeach.mp4\thalf_sbs\textra\n", "line 2: 3 cells for 2 columns"),
    ("video\trender.layout\n\thalf_sbs\n", "line 2: the 'video' cell is empty"),
    ("", "video sheet is empty"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[f"bad{n}" for n in range(len(BAD))])
def test_a_bad_sheet_is_one_line_naming_the_sheet_the_line_and_the_column(tmp_path, folder, library, text, message):
    with pytest.raises(BadConfig) as caught:
        settings(tmp_path, folder, library, text)
    assert message in str(caught.value), str(caught.value)
    assert str(tmp_path / "videos.tsv") in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_sheet_or_one_that_is_not_text_is_named(tmp_path):
    with pytest.raises(BadConfig, match="video sheet not found"):
        read_sheet(tmp_path / "nowhere.tsv")
    (tmp_path / "binary.tsv").write_bytes(b"video\n\xff\xfe\x00junk\n")
    with pytest.raises(BadConfig, match="binary.tsv: video sheet is not UTF-8 text"):
        read_sheet(tmp_path / "binary.tsv")


def test_the_workflow_refuses_a_bad_sheet_before_any_job(tmp_path):
    make_clip(tmp_path / "videos/beach.mp4", width=64, height=48, frames=4)
    (tmp_path / "videos.tsv").write_text("video\trender.divergence_pct\nbeach.mp4\t50\n")
    write_config(tmp_path, library={"folder": "videos", "sheet": "videos.tsv"})
    done = snakemake(tmp_path, "-n", check=False)
    assert done.returncode != 0
    assert "videos.tsv: line 2 (beach.mp4): render.divergence_pct: 50 is greater than the maximum of 10" in (
        done.stdout + done.stderr
    )
    assert not (tmp_path / "work").exists()


def test_the_sheet_decides_each_videos_output_name(tmp_path):
    from safetensors.numpy import save_file

    from stereo3d.models.da3.checkpoint import HUB_PREFIX, WIDTH_KEY

    for name in ("beach.mp4", "concert.mp4"):
        make_clip(tmp_path / "videos" / name, width=64, height=48, frames=4)
    # A dry run reads only the weights' header: one tensor of Small's ViT width is enough.
    (tmp_path / "weights/DA3/Small").mkdir(parents=True)
    save_file(
        {HUB_PREFIX + WIDTH_KEY: np.zeros((384, 3, 14, 14), np.float16)},
        str(tmp_path / "weights/DA3/Small/model.safetensors"),
    )
    (tmp_path / "videos.csv").write_text("video,render.layout\nconcert.mp4,anaglyph_dubois\n")
    write_config(tmp_path, library={"folder": "videos", "sheet": "videos.csv"})
    snakemake(tmp_path, "work/beach/probe.json", "work/concert/probe.json")  # what a dry run plans after
    plan = snakemake(tmp_path, "-n", "all").stdout
    assert f"results/beach/beach{LAYOUT_TAGS['full_sbs']}.mp4" in plan
    assert f"results/concert/concert{LAYOUT_TAGS['anaglyph_dubois']}.mp4" in plan
    assert "concert_LRF_Full_SBS" not in plan
