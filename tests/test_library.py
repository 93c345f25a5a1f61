"""Library discovery: every file name works and ids are stable, safe and unique."""

import re

import pytest

from stereo3d.errors import BadConfig
from stereo3d.workflow.keys import settings_hash
from stereo3d.workflow.library import ID_PATTERN, discover, video_id


def test_safe_names_are_their_own_id():
    assert video_id("holiday_2024.mp4") == "holiday_2024"


@pytest.mark.parametrize(
    "name", ["my film (1).mp4", "Мой фильм.mkv", "a;$(rm -rf x)'\".mp4", "sub/dir/clip.mp4", "..hidden dots...mp4"]
)
def test_any_name_gives_a_wildcard_safe_stable_id(name):
    vid = video_id(name)
    assert re.fullmatch(ID_PATTERN, vid)
    assert video_id(name) == vid


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
