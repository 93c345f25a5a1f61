"""Subtitles burnt into both eyes in depth (subtitles.burn): the track chosen, each cue drawn once, placed in front
of the nearest content under it over its time (never behind the screen), one depth a cue, measured from the pixels
of the two eyes; text and bitmap tracks; through the workflow, with soft tracks kept or not."""

from __future__ import annotations

import numpy as np
import pytest
from harness import exported_workdir, pgs_subtitles, planned_jobs, snakemake, write_config

from stereo3d.io.ffmpeg import ffmpeg_url, run_ffmpeg
from stereo3d.io.mapstore import write_maps
from stereo3d.io.probe import probe_video
from stereo3d.io.subtitles import choose_track
from stereo3d.stages.render import RenderSettings, stereo_views
from stereo3d.stages.subtitle_plan import plan_subtitles
from stereo3d.stereo.subtitles import SubtitlePlan
from stereo3d.stereo.warp import Renderer, StereoSettings

W, H, FPS, FRAMES = 320, 180, 12, 12
# The near maps (a quarter of the frame): far (0.1) everywhere, a near box (0.9) under the bottom middle.
NEAR_BOX = (slice(30, 45), slice(20, 60))  # rows, columns of the map: frame y 120..180, x 80..240
STEREO = StereoSettings(divergence_pct=4.0, convergence=0.5, edge_dilate_px=0, floating_window="off")
# Parallax of the near box: (0.9 - 0.5) x 4 % of 320 px; of the far wall: -5.12 px, behind the screen.
NEAR_PARALLAX, MARGIN = 0.4 * 12.8, 0.2 / 100 * W

TRACKS = [
    {"index": 2, "codec": "subrip", "language": "eng", "default": False},
    {"index": 3, "codec": "ass", "language": "fra", "default": True},
    {"index": 4, "codec": "hdmv_pgs_subtitle", "language": "jpn", "default": False},
]


@pytest.mark.parametrize(
    ("burn", "index"),
    [("none", None), ("auto", 3), ("eng", 2), ("FRA", 3), ("jpn", 4), ("deu", None), ("0", 2), (2, 4), ("3", None)],
)
def test_the_track_to_burn_is_the_default_one_or_named_by_language_or_number(burn, index):
    chosen = choose_track(burn, TRACKS)
    assert (chosen or {}).get("index") == index
    assert choose_track("auto", [{**t, "default": False} for t in TRACKS])["index"] == 2  # no default: the first
    assert choose_track("auto", []) is None


ASS = """[Script Info]
ScriptType: v4.00+
PlayResX: 320
PlayResY: 180

[V4+ Styles]
Format: Name, Fontname, Fontsize, PrimaryColour, OutlineColour, Bold, Italic, BorderStyle, Outline, Shadow, Alignment, \
MarginL, MarginR, MarginV
Style: Default,DejaVu Sans,40,&H00FFFFFF,&H00000000,1,0,1,2,0,2,10,10,8

[Events]
Format: Layer, Start, End, Style, Text
Dialogue: 0,0:00:00.00,0:00:00.50,Default,NEAR
Dialogue: 0,0:00:00.50,0:00:01.00,Default,{\\an7\\pos(8,4)}FAR
""".replace("\\\n", "")


def with_track(make_clip, tmp_path, track, *options) -> tuple:
    """A 320x180 clip of 12 frames at 12 fps with one subtitle ``track`` (a file ffmpeg reads), and its probe."""
    base = make_clip("base.mkv", width=W, height=H, frames=FRAMES, fps=str(FPS), pattern="boxes", codec="ffv1")
    source = tmp_path / "source.mkv"
    run_ffmpeg(["-i", ffmpeg_url(base), *options, "-i", ffmpeg_url(track), "-map", "0:v", "-map", "1", "-c", "copy",
                "-y", ffmpeg_url(source)], source, "making the test source")  # fmt: skip
    return source, probe_video(source)


def near_store(tmp_path):
    near = np.full((FRAMES, H // 4, W // 4), 0.1, np.float32)
    near[:, NEAR_BOX[0], NEAR_BOX[1]] = 0.9
    path = tmp_path / "near.zarr"
    write_maps(path, near, "linear", attrs={"start": 0})
    return path, near


def eye_shift(with_cue: np.ndarray, without: np.ndarray) -> tuple[int, int]:
    """How far right the right eye's drawing lies from the left eye's (the horizontal shift that best lays the
    pixels the cue changed in one eye on those it changed in the other), and how many pixels it changed."""
    changed = [(a != b).any(axis=2) for a, b in zip(with_cue, without)]
    scores = {shift: int((np.roll(changed[0], shift, axis=1) & changed[1]).sum()) for shift in range(-20, 21)}
    return max(scores, key=scores.get), int(changed[0].sum())


def measured(source, probe, near, plan, frame_index):
    from stereo3d.io.decode import FrameReader

    with FrameReader(source, probe, start=frame_index, count=1) as frames:
        frame = next(iter(frames))
    with Renderer("cpu", threads=1) as renderer:
        plain = stereo_views(renderer, frame, near[frame_index], STEREO)
        burnt = stereo_views(renderer, frame, near[frame_index], STEREO, cues=plan.at(frame_index))
    return eye_shift(burnt, plain)


def planned(make_clip, tmp_path, script: str) -> tuple:
    """The test clip with the ASS ``script`` as its track, its probe, its near maps and its subtitle plan."""
    style = tmp_path / "track.ass"
    style.write_text(script, encoding="utf-8")
    source, probe = with_track(make_clip, tmp_path, style)
    path, near = near_store(tmp_path)
    settings = RenderSettings(stereo=STEREO, subtitle_stream=probe["subtitles"][0]["index"])
    plan_subtitles(source, probe, [path], tmp_path / "subtitles.npz", settings)
    return source, probe, near, SubtitlePlan.load(tmp_path / "subtitles.npz")


def test_a_text_cue_sits_in_front_of_the_nearest_content_under_it_and_never_behind_the_screen(make_clip, tmp_path):
    source, probe, near, plan = planned(make_clip, tmp_path, ASS)
    assert [(cue.first, cue.end) for cue in plan.cues] == [(0, 6), (6, 12)]
    near_cue, far_cue = plan.cues
    # NEAR lies over the near box (bottom middle): in front of it by the margin. FAR, top left, over the far wall
    # (behind the screen): on the screen plane, in front of it by the margin.
    assert near_cue.y + near_cue.picture.shape[0] > 120 and 80 < near_cue.x < 240
    assert near_cue.parallax == pytest.approx(NEAR_PARALLAX + MARGIN, abs=1e-3)
    assert far_cue.x < 40 and far_cue.y < 40
    assert far_cue.parallax == pytest.approx(MARGIN, abs=1e-6)
    # From the pixels: the left eye's text lies right of the right eye's (in front of the screen), by the cue's
    # parallax rounded, on every frame of the cue (one depth).
    for index in (0, 3, 5):
        shift, drawn = measured(source, probe, near, plan, index)
        assert drawn > 200 and shift == -round(NEAR_PARALLAX + MARGIN), index
    for index in (6, 11):
        shift, drawn = measured(source, probe, near, plan, index)
        assert drawn > 100 and shift == -round(MARGIN), index


# NEAR over the near box for the whole second, FAR in the top left over the far wall for a quarter of it, meanwhile.
OVERLAPPING = ASS.replace("0:00:00.00,0:00:00.50,Default,NEAR", "0:00:00.00,0:00:01.00,Default,NEAR").replace(
    "0:00:00.50,0:00:01.00,Default,{", "0:00:00.25,0:00:00.50,Default,{"
)


def test_cues_shown_together_are_drawn_once_each_frame_and_a_staying_line_keeps_its_depth(make_clip, tmp_path):
    # Until 2026-12-06 each cue was drawn alone at its middle: FAR's picture, drawn after NEAR's middle, showed NEAR
    # (FAR was never seen) and frames 3-5 drew NEAR twice, at two depths where the two differ.
    source, probe, near, plan = planned(make_clip, tmp_path, OVERLAPPING)
    # Three screens (NEAR; NEAR and FAR; NEAR again), one picture a frame, all at NEAR's depth: it stays on.
    assert [(cue.first, cue.end) for cue in plan.cues] == [(0, 3), (3, 6), (6, 12)]
    assert all(len(plan.at(index)) == 1 for index in range(FRAMES))
    assert {round(cue.parallax, 3) for cue in plan.cues} == {round(NEAR_PARALLAX + MARGIN, 3)}
    for index in range(FRAMES):
        far_drawn = plan.at(index)[0].y < 40  # FAR's block, at the top, is in the screen's picture
        assert far_drawn == (3 <= index < 6), index
        shift, drawn = measured(source, probe, near, plan, index)
        assert shift == -round(NEAR_PARALLAX + MARGIN) and drawn > 200, index


def test_a_cue_shorter_than_a_frame_takes_the_next_frame_where_nothing_else_is_shown(make_clip, tmp_path):
    # 12 fps: frames at 0, 0.083, 0.167, ... A cue between two frames is shown on the frame after it, unless another
    # cue is shown there: one picture a frame.
    events = ["0:00:00.00,0:00:00.10,Default,ONE", "0:00:00.10,0:00:00.12,Default,FLASH", "0:00:00.13,0:00:00.40,"
              "Default,TWO", "0:00:00.60,0:00:00.62,Default,ALONE"]  # fmt: skip
    script = ASS.split("Dialogue:")[0] + "".join(f"Dialogue: 0,{event}\n" for event in events)
    plan = planned(make_clip, tmp_path, script)[3]
    assert [(cue.first, cue.end) for cue in plan.cues] == [(0, 2), (2, 5), (8, 9)]


def test_a_screen_takes_the_depth_of_what_lies_under_its_blocks_not_under_the_box_around_them(make_clip, tmp_path):
    # A sign at the top left and a small line at the bottom right, both over the far wall: the box around them both
    # covers the near box at the bottom middle; their blocks do not. (A screen placed by that box sat in front of
    # the near box.)
    events = ["0:00:00.00,0:00:01.00,Default,{\\an7\\pos(8,4)}FAR",
              "0:00:00.00,0:00:01.00,Default,{\\an3\\pos(316,176)\\fs20}LOW"]  # fmt: skip
    script = ASS.split("Dialogue:")[0] + "".join(f"Dialogue: 0,{event}\n" for event in events)
    (cue,) = planned(make_clip, tmp_path, script)[3].cues
    assert cue.x < 40 and cue.y < 40 and cue.x + cue.picture.shape[1] > 280 and cue.y + cue.picture.shape[0] > 150
    assert cue.parallax == pytest.approx(MARGIN, abs=1e-6)


@pytest.mark.parametrize(
    ("cues", "expected"),
    [
        ([(0, 1), (2, 3)], [(0, 1, 0), (2, 3, 1)]),  # apart
        ([(0, 1), (1, 2)], [(0, 1, 0), (1, 2, 1)]),  # one line after another: each its own depth
        ([(0, 4), (1, 2)], [(0, 1, 0), (1, 2, 0), (2, 4, 0)]),  # a line staying while another comes and goes
        ([(0, 2), (1, 3), (3, 4)], [(0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 4, 1)]),  # overlapping, then another
        ([(1, 2), (1, 2), (0, 3)], [(0, 1, 0), (1, 2, 0), (2, 3, 0)]),  # the same times twice, inside a third
        ([], []),
    ],
)
def test_the_screen_changes_at_every_cues_start_and_end(cues, expected):
    from stereo3d.io.subtitles import Cue, screens

    assert [(c.start_s, c.end_s, c.group) for c in screens([Cue(a, b) for a, b in cues])] == expected


def test_mp4_timed_text_is_drawn_as_the_other_text_tracks(make_clip, tmp_path):
    # MP4's own text track (mov_text: what an MP4 with subtitles holds) cannot be copied out into Matroska as it is;
    # until 2026-12-06 burning one failed the video ("Could not write header").
    from stereo3d.io.subtitles import cue_pictures

    source = make_clip("timed_text.mp4", width=W, height=H, frames=FRAMES, fps=str(FPS), subtitles=True)
    track = choose_track("auto", probe_video(source)["subtitles"])
    assert track["codec"] == "mov_text"
    drawn = [(cue, picture[..., 3].sum()) for cue, picture in cue_pictures(source, track, (W, H), (W, H), tmp_path)]
    assert len(drawn) == 2 and all(alpha > 0 for _, alpha in drawn)
    assert drawn[0][0].end_s <= drawn[1][0].start_s


def test_each_block_a_screen_draws_is_its_own_box():
    from stereo3d.stereo.subtitles import blocks_of

    picture = np.zeros((100, 200, 4), np.uint8)
    picture[4:14, 6:40, 3] = 255  # a sign at the top left
    picture[80:90, 20:60, 3] = 255  # two words of a line at the bottom, a space apart
    picture[80:90, 64:100, 3] = 255
    picture[80:90, 150:190, 3] = 255  # another speaker's line beside it, far apart
    picture[92:98, 20:50, 3] = 255  # the line's second row, a clear row below the first
    assert blocks_of(picture) == [(6, 4, 34, 10), (20, 80, 80, 10), (150, 80, 40, 10), (20, 92, 30, 6)]
    assert blocks_of(np.zeros((4, 4, 4), np.uint8)) == []


def test_a_bitmap_cue_is_scaled_to_the_eye_and_placed_in_depth(make_clip, tmp_path):
    # A Blu-ray PGS track authored at half the frame's size: a white box over the near box, then one over the wall.
    sup = tmp_path / "bitmaps.sup"
    pgs_subtitles(sup, [(0.0, 0.5)], size=(W // 2, H // 2), box=(60, 70, 40, 12))
    source, probe = with_track(make_clip, tmp_path, sup)
    assert probe["subtitles"][0]["codec"] == "hdmv_pgs_subtitle"
    path, near = near_store(tmp_path)
    settings = RenderSettings(stereo=STEREO, subtitle_stream=probe["subtitles"][0]["index"])
    plan_subtitles(source, probe, [path], tmp_path / "subtitles.npz", settings)
    (cue,) = SubtitlePlan.load(tmp_path / "subtitles.npz").cues
    assert (cue.first, cue.end) == (0, 6)
    height, width = cue.picture.shape[:2]
    assert 78 <= width <= 86 and 22 <= height <= 30 and 116 <= cue.x <= 122 and 136 <= cue.y <= 142  # scaled x2
    assert cue.parallax == pytest.approx(NEAR_PARALLAX + MARGIN, abs=1e-3)
    shift, drawn = measured(source, probe, near, SubtitlePlan.load(tmp_path / "subtitles.npz"), 2)
    assert drawn > 1000 and shift == -round(NEAR_PARALLAX + MARGIN)


def test_a_bitmap_cue_in_a_cropped_bar_moves_into_the_picture_at_its_own_shape(make_clip, tmp_path):
    # bars: crop, the picture the middle 120 rows: a PGS track authored for the whole frame, its cue in the bottom bar
    # (as Blu-rays of scope films place them). Until 2026-12-06 its canvas was stretched onto the picture (the cue 2/3
    # as high); now it keeps its shape and is moved up into the picture.
    from stereo3d.stereo.bars import Area

    sup = tmp_path / "in_the_bar.sup"
    pgs_subtitles(sup, [(0.0, 0.5)], size=(W, H), box=(140, 160, 40, 12))
    source, probe = with_track(make_clip, tmp_path, sup)
    path, _ = near_store(tmp_path)
    picture = Area(0, 30, W, 120)
    settings = RenderSettings(stereo=STEREO, subtitle_stream=probe["subtitles"][0]["index"], bars="crop")
    plan_subtitles(source, probe, [path], tmp_path / "subtitles.npz", settings, picture=picture)
    (cue,) = SubtitlePlan.load(tmp_path / "subtitles.npz").cues
    height, width = cue.picture.shape[:2]
    assert 38 <= width <= 42 and 11 <= height <= 13  # as authored
    assert 138 <= cue.x <= 142 and cue.y + height == picture.height  # moved up to the picture's bottom edge


def test_blocks_in_the_bars_move_into_the_picture_with_the_lines_stacked_against_them():
    from stereo3d.stereo.bars import Area
    from stereo3d.stereo.subtitles import blocks_of, into_picture

    canvas = np.zeros((180, 320, 4), np.uint8)
    canvas[5:15, 100:200] = (255, 0, 0, 255)  # a sign in the top bar
    canvas[142:152, 60:260] = (0, 255, 0, 255)  # a two-line cue, its first line inside the picture (rows 30-150)
    canvas[156:166, 80:240] = (0, 0, 255, 255)  # ... and its second in the bottom bar
    canvas[70:80, 20:60] = (255, 255, 255, 255)  # a cue well inside the picture
    eye = into_picture(canvas, Area(0, 30, 320, 120))
    # The sign down to the picture's top edge; the cue's two lines up together (4 rows apart, as drawn), the lower
    # at the picture's bottom edge; the cue inside where it was (the picture starts 30 rows down).
    assert blocks_of(eye) == [(100, 0, 100, 10), (20, 40, 40, 10), (60, 96, 200, 10), (80, 110, 160, 10)]
    assert (eye[0, 100] == (255, 0, 0, 255)).all() and (eye[119, 80] == (0, 0, 255, 255)).all()
    # Pillarboxed: a cue reaching into the right bar moves left, whole.
    wide = np.zeros((180, 320, 4), np.uint8)
    wide[160:170, 250:300, 3] = 255
    assert blocks_of(into_picture(wide, Area(40, 0, 240, 180))) == [(190, 160, 50, 10)]


@pytest.mark.parametrize(("transfer", "white"), [("smpte2084", 148), ("arib-std-b67", 191), ("bt709", 255)])
def test_a_cues_white_is_the_pictures_white_or_graphics_white_in_hdr(make_clip, tmp_path, transfer, white):
    # White text drawn at full code value into a PQ film would be its 10,000 cd/m²; BT.2408's graphics white is
    # 203 cd/m² (PQ 0.58) and 75 % of an HLG signal. The probe says which the video is. In an SDR picture white is
    # 255 and black 0: the bundled FFmpeg's libass drawing gave 235 and 16 (grey text, a dark grey outline) until
    # 2026-12-06.
    style = tmp_path / "styled.ass"
    style.write_text(ASS, encoding="utf-8")
    source, probe = with_track(make_clip, tmp_path, style)
    probe["video"].update(color_transfer=transfer, color_primaries="bt2020")
    path, _ = near_store(tmp_path)
    settings = RenderSettings(stereo=STEREO, subtitle_stream=probe["subtitles"][0]["index"])
    plan_subtitles(source, probe, [path], tmp_path / "subtitles.npz", settings)
    for cue in SubtitlePlan.load(tmp_path / "subtitles.npz").cues:
        opaque = cue.picture[..., 3] == 255
        assert cue.picture[..., :3][opaque].max() == white  # the text's white; its black outline stays black
        assert cue.picture[..., :3][opaque].min() == 0


def test_the_workflow_burns_a_track_in_depth_and_keeps_the_soft_tracks_or_not(tmp_path_factory):
    from stereo3d.demo.samples import make_clip

    workdir = exported_workdir(tmp_path_factory, "subtitles")
    make_clip(workdir / "videos/talk.mkv", width=64, height=36, frames=12, fps="12", subtitles=True)
    write_config(workdir, subtitles={"burn": "eng", "keep": False}, encode={"piece_frames": 8})
    snakemake(workdir)
    (plan,) = workdir.glob("work/talk/render/*/*/*/subtitles.npz")
    cues = SubtitlePlan.load(plan).cues
    assert cues and all(cue.parallax > 0 for cue in cues)
    (result,) = (workdir / "results/talk").glob("*.mp4")
    assert probe_video(result)["subtitles"] == []  # burnt in, not kept as a soft track
    log = next(workdir.glob("logs/subtitle_plan/**/*.log")).read_text()
    assert "subtitle cues of stream #1 (subrip) in depth" in log
    # Kept too: the mux alone runs again (and the render before it, whose encoded video is not kept).
    write_config(workdir, subtitles={"burn": "eng"}, encode={"piece_frames": 8})
    assert planned_jobs(workdir) == {"render": 1, "join": 1, "qc_library": 1}
    snakemake(workdir)
    assert [s["language"] for s in probe_video(result)["subtitles"]] == ["eng"]
    # The text track beside the result too, for players that draw a sidecar: its lines in both eyes; nothing else
    # runs again.
    write_config(workdir, subtitles={"burn": "eng", "sidecar": True}, encode={"piece_frames": 8})
    assert planned_jobs(workdir) == {"subtitle_sidecar": 1}
    snakemake(workdir)
    sidecar = result.with_name(result.stem + ".0.eng.ass").read_text(encoding="utf-8")
    source_lines = [line for line in sidecar.splitlines() if line.startswith("Dialogue:")]
    assert len(source_lines) == 2 * len(cues) and "PlayResX" in sidecar


def test_the_cues_of_each_frame_are_found_in_order_and_out_of_order():
    from stereo3d.stereo.subtitles import PlacedCue

    picture = np.zeros((2, 3, 4), np.uint8)
    spans = [(0, 5), (3, 9), (4, 6), (20, 30)]
    plan = SubtitlePlan([PlacedCue(first, end, 0, 0, picture, 1.0) for first, end in spans])
    expected = [sorted((f, e) for f, e in spans if f <= index < e) for index in range(32)]
    walked = [sorted((cue.first, cue.end) for cue in plan.at(index)) for index in range(32)]
    assert walked == expected
    assert [(c.first, c.end) for c in plan.at(4)] == [(0, 5), (3, 9), (4, 6)]  # asked again, after later frames


def drawn_halves(script: str, packed: tuple[int, int], tmp_path) -> list[np.ndarray]:
    """What libass draws of ``script`` over a transparent packed frame at 0.2 s: its alpha in each half (the left
    and right eye of side by side)."""
    import cv2

    path = tmp_path / "sidecar.ass"
    path.write_text(script, encoding="utf-8")
    out = tmp_path / "drawn.png"
    run_ffmpeg(["-y", "-f", "lavfi", "-i", f"color=c=black@0:s={packed[0]}x{packed[1]}:r=5:d=0.4,format=rgba",
                "-vf", f"subtitles=filename='{path.as_posix()}':alpha=1", "-ss", "0.2", "-frames:v", "1", "-update",
                "1", ffmpeg_url(out)], out, "drawing the sidecar")  # fmt: skip
    alpha = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)[..., 3] > 64
    return [alpha[:, : packed[0] // 2], alpha[:, packed[0] // 2 :]]


def test_a_sidecar_places_every_line_in_both_eyes_at_its_depth(tmp_path):
    from stereo3d.stereo.sidecar import stereo_ass

    script = ASS.replace("{\\an7\\pos(8,4)}FAR", "{\\an7\\pos(20,30)}FAR").replace(
        "0:00:00.50,Default,NEAR", "0:00:00.40,Default,NEAR"
    )
    depth = {0.0: 10.0, 0.5: 0.0}  # px of parallax at a 320 px eye: NEAR 10 (in front), FAR 0

    sidecar = stereo_ass(script, "left_right", W, lambda start, end: depth[start])
    assert "PlayResX: 640" in sidecar and "PlayResY: 180" in sidecar
    lines = [line for line in sidecar.splitlines() if line.startswith("Dialogue:")]
    assert len(lines) == 4  # each event in both eyes
    assert "\\pos(20.0,30.0)" in lines[2] and "\\pos(340.0,30.0)" in lines[3]  # FAR: the right eye's copy 320 on
    # NEAR as libass draws it over a full side-by-side frame: in each eye's half, the left eye's copy 10 px right of
    # the right eye's (in front of the screen, as a burnt cue); styles, size and line kept.
    left, right = drawn_halves(sidecar, (2 * W, H), tmp_path)
    assert left.sum() > 300 and abs(int(left.sum()) - int(right.sum())) < 0.02 * left.sum()
    scores = {shift: int((np.roll(left, shift, axis=1) & right).sum()) for shift in range(-20, 21)}
    assert max(scores, key=scores.get) == -10
    # Top and bottom: the copies in the upper and the lower half, each at its eye's bottom margin.
    stacked = stereo_ass(script, "top_bottom", W, lambda start, end: 0.0)
    assert "PlayResX: 320" in stacked and "PlayResY: 360" in stacked
    near = [line for line in stacked.splitlines() if line.startswith("Dialogue:") and "NEAR" in line]
    assert [line.split(",")[7] for line in near] == ["188", "8"]  # MarginV: above the top eye's bottom, the frame's


@pytest.mark.parametrize(("layout", "squeeze"), [("full_tb", 1), ("half_sbs", 2), ("half_tb", 1)])
def test_a_dvd_cue_is_burnt_in_depth_in_every_packing(make_clip, tmp_path, layout, squeeze):
    # A DVD (VobSub) track, from the PGS file as DVD rips store it; drawn into each eye before the packing, so a
    # squeezed packing squeezes the cue and its parallax with the picture.
    from stereo3d.stages.render import stereo_frame
    from stereo3d.stereo.layouts import get_layout

    sup = tmp_path / "bitmaps.sup"
    pgs_subtitles(sup, [(0.0, 0.5)], size=(W // 2, H // 2), box=(60, 70, 40, 12))
    base = make_clip("base.mkv", width=W, height=H, frames=FRAMES, fps=str(FPS), pattern="boxes", codec="ffv1")
    mkv = tmp_path / "dvd.mkv"
    run_ffmpeg(["-i", ffmpeg_url(base), "-fix_sub_duration", "-i", ffmpeg_url(sup), "-map", "0", "-map", "1", "-c:v",
                "copy", "-c:s", "dvdsub", "-y", ffmpeg_url(mkv)], mkv, "making the DVD track")  # fmt: skip
    probe = probe_video(mkv)
    assert probe["subtitles"][0]["codec"] == "dvd_subtitle"
    path, near = near_store(tmp_path)
    settings = RenderSettings(stereo=STEREO, layout=layout, subtitle_stream=probe["subtitles"][0]["index"])
    plan_subtitles(mkv, probe, [path], tmp_path / "subtitles.npz", settings)
    plan = SubtitlePlan.load(tmp_path / "subtitles.npz")
    assert plan.cues and plan.cues[0].parallax == pytest.approx(NEAR_PARALLAX + MARGIN, abs=1e-3)
    from stereo3d.io.decode import FrameReader

    with FrameReader(mkv, probe, start=2, count=1) as frames:
        frame = next(iter(frames))
    with Renderer("cpu", threads=1) as renderer:
        packed = [stereo_frame(renderer, frame, near[2], STEREO, layout, {}, cues=cues) for cues in ((), plan.at(2))]
    side = get_layout(layout).stereo_mode == "left_right"

    def eyes(image):
        return (image[:, : image.shape[1] // 2], image[:, image.shape[1] // 2 :]) if side else (
            image[: image.shape[0] // 2], image[image.shape[0] // 2 :])  # fmt: skip

    shift, drawn = eye_shift(eyes(packed[1]), eyes(packed[0]))
    assert drawn > 300 // squeeze and shift == -round(round(NEAR_PARALLAX + MARGIN) / squeeze)
