"""Library discovery: every file name works and ids are stable, safe and unique."""

import re

import pytest

from stereo3d.errors import BadConfig
from stereo3d.workflow.keys import settings_hash
from stereo3d.workflow.library import ID_PATTERN, discover, video_id


def test_safe_names_are_their_own_id():
    assert video_id("holiday_2024.mp4") == "holiday_2024"


# Ids computed once (stereo3d.workflow.library.video_id at the time of writing) and frozen: results, work files
# and logs are named by them, so an id that changes between versions orphans every finished file of a library.
GOLDEN_IDS = {
    "holiday_2024.mp4": "holiday_2024",
    "clip.MKV": "clip",
    "a_b.mp4": "a_b",
    "my film (1).mp4": "my_film_1-ffdf79",
    "Мой фильм.mkv": "video-1d2a71",
    "視頻.mp4": "video-79193c",
    "a;$(rm -rf x)'\".mp4": "a_rm_-rf_x-7f7aa8",
    "sub/dir/clip.mp4": "sub__dir__clip-3e6563",
    "sub/clip.mp4": "sub__clip-0480f8",
    "sub__clip.mp4": "sub__clip-a796a4",
    "a__b.mp4": "a__b-2bc400",
    "a b.mp4": "a_b-a1f10c",
    "..hidden dots...mp4": "hidden_dots-a7126b",
    "Caf\u00e9.mp4": "Cafe-dcbcd5",  # NFC
    "Cafe\u0301.mp4": "Cafe-cc4a98",  # NFD: another name (and file) for the same letters, so another id
}


@pytest.mark.parametrize("name", list(GOLDEN_IDS))
def test_any_name_gives_a_wildcard_safe_id_that_never_changes(name):
    vid = video_id(name)
    assert re.fullmatch(ID_PATTERN, vid)
    assert vid == GOLDEN_IDS[name]


def test_distinct_names_give_distinct_ids():
    """Also the pairs that look alike once made safe: "a b" and "a_b", "sub/clip" and "sub__clip", NFC and NFD."""
    assert len(set(GOLDEN_IDS.values())) == len(GOLDEN_IDS)


def test_discovery_filters_extensions_and_recurses(tmp_path):
    (tmp_path / "a.mp4").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.MKV").write_bytes(b"x")
    (tmp_path / "folder.mp4").mkdir()  # a folder named like a video is not a video
    found = discover(tmp_path, [".mp4", ".mkv"], recursive=True)
    assert sorted(found) == ["a", video_id("sub/b.MKV")]
    assert sorted(discover(tmp_path, [".mp4", ".mkv"], recursive=False)) == ["a"]


def test_two_files_with_one_id_are_reported(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"x")
    (tmp_path / "clip.mkv").write_bytes(b"x")
    with pytest.raises(BadConfig, match="same id 'clip'"):
        discover(tmp_path, [".mp4", ".mkv"])


def test_missing_library_folder_is_one_clear_error(tmp_path):
    with pytest.raises(BadConfig, match="library folder not found"):
        discover(tmp_path / "nope", [".mp4"])


def test_settings_hash_ignores_key_order_and_number_spelling():
    assert settings_hash({"a": 2.0, "b": 1}) == settings_hash({"b": 1, "a": 2})
    assert settings_hash({"a": 2}) != settings_hash({"a": 3})
