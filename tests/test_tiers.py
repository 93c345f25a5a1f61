"""Aspect tiers: which DA3 export a video of a given shape runs through, and what its depth is keyed by."""

import pytest

from stereo3d.models.da3.tiers import DEFAULT_TIERS, export_shape, nearest_tier, parse_aspect, tier_shape, tier_shapes
from stereo3d.stages.depth import DepthSettings
from stereo3d.stereo.bars import Area
from stereo3d.workflow import keys
from stereo3d.workflow.keys import DEPTH_KEY, parse_depth_key

DA3 = {"variant": "small", "size": 518, "contract": "uint8", "fit": "aspect", "aspect_tiers": list(DEFAULT_TIERS)}


def depth_key(da3: dict, display: tuple[int, int], precision: str = "exact", picture: Area | None = None) -> str:
    """The depth key of a video of ``display`` size (``picture``: the area inside its bars) under ``da3`` and
    ``runtime.precision``, through its DepthSettings as the workflow builds them."""
    sections = {"da3": da3, "runtime": {"precision": precision}}
    return keys.depth_key(DepthSettings.from_sections(sections, display, picture))


@pytest.mark.parametrize(
    ("tier", "shape"),
    [("16:9", (518, 294)), ("4:3", (518, 392)), ("1:1", (518, 518)), ("9:16", (294, 518)), ("2.39:1", (518, 210))],
)
def test_the_longest_side_is_the_size_and_both_sides_are_patch_multiples(tier, shape):
    assert tier_shape(parse_aspect(tier), 518) == shape
    width, height = tier_shape(parse_aspect(tier), 140)
    assert max(width, height) == 140 and width % 14 == 0 and height % 14 == 0


@pytest.mark.parametrize(
    ("display", "tier"),
    [
        ((1920, 1080), "16:9"),
        ((1998, 1080), "16:9"),  # 1.85:1 flat
        ((2048, 858), "2.39:1"),  # scope
        ((1440, 1080), "4:3"),
        ((1080, 1080), "1:1"),
        ((1080, 1920), "9:16"),
        ((720, 576), "4:3"),
    ],
)
def test_a_video_takes_the_nearest_tier(display, tier):
    assert nearest_tier(*display, DEFAULT_TIERS) == tier


def test_the_fits_choose_the_square_or_the_tier():
    assert export_shape(DA3, (1920, 1080)) == (518, 294)
    assert export_shape({**DA3, "fit": "letterbox"}, (1920, 1080)) == (518, 518)
    assert export_shape({**DA3, "fit": "resize"}, None) == (518, 518)
    with pytest.raises(ValueError, match="display size"):
        export_shape(DA3, None)


def test_tier_shapes_lists_each_export_once():
    assert tier_shapes(DA3) == [(518, 294), (518, 392), (518, 518), (518, 210), (294, 518)]
    assert tier_shapes({**DA3, "aspect_tiers": ["16:9", "1.78:1"]}) == [(518, 294)]
    assert tier_shapes({**DA3, "fit": "letterbox"}) == [(518, 518)]


@pytest.mark.parametrize("bad", ["16/9", "0:9", "16:0", "wide", ""])
def test_a_bad_aspect_is_refused(bad):
    with pytest.raises(ValueError, match="WIDTH:HEIGHT"):
        parse_aspect(bad)


def test_the_depth_key_names_the_export_and_round_trips():
    key = depth_key(DA3, (1920, 1080))
    assert key == "da3_small_518x294_u8_letterbox"
    assert parse_depth_key(key) == {"variant": "small", "shape": (518, 294), "contract": "uint8",
                                    "placement": "letterbox", "picture": None, "precision": "exact"}  # fmt: skip


def test_a_picture_in_bars_picks_the_tier_of_its_own_aspect_and_is_named_in_the_key():
    tv = Area(240, 0, 1440, 1080)  # 4:3 pillarboxed in 16:9
    key = depth_key(DA3, (1920, 1080), "fast", tv)
    assert key == "da3_small_518x392_u8_letterbox_crop1440x1080+240+0_fast"
    assert parse_depth_key(key)["picture"] == tv and parse_depth_key(key)["shape"] == (518, 392)
    scope = depth_key(DA3, (1920, 1080), picture=Area(0, 140, 1920, 800))  # 2.4:1 letterboxed in 16:9
    assert scope == "da3_small_518x210_u8_letterbox_crop1920x800+0+140"
    assert DEPTH_KEY.fullmatch(scope) and not DEPTH_KEY.fullmatch(scope.replace("+140", "-140"))


def test_fast_precision_has_its_own_depth_key():
    # bf16/fp16/TF32 give other numbers: stored apart, and switching back to exact finds the exact depth again
    fast = depth_key(DA3, (1920, 1080), precision="fast")
    assert fast == "da3_small_518x294_u8_letterbox_fast" != depth_key(DA3, (1920, 1080), precision="exact")
    assert parse_depth_key(fast)["precision"] == "fast"
    assert {k: v for k, v in parse_depth_key(fast).items() if k != "precision"} == {
        k: v for k, v in parse_depth_key(depth_key(DA3, (1920, 1080))).items() if k != "precision"
    }


def test_the_depth_key_moves_only_when_the_export_does():
    square = (1080, 1080)
    # aspect and letterbox place a square video the same way in the same export: the same depth
    assert depth_key(DA3, square) == depth_key({**DA3, "fit": "letterbox"}, square)
    # a tier list that still gives a 16:9 video the 16:9 tier leaves its depth alone
    assert depth_key({**DA3, "aspect_tiers": ["16:9", "1:1"]}, (1920, 1080)) == depth_key(DA3, (1920, 1080))
    # one that sends it elsewhere does not
    assert depth_key({**DA3, "aspect_tiers": ["4:3", "1:1"]}, (1920, 1080)) == "da3_small_518x392_u8_letterbox"
    assert depth_key({**DA3, "variant": "mono_large"}, (1920, 1080)) == "da3_mono_large_518x294_u8_letterbox"
