"""Disocclusions filled with what the scene hides (stereo3d.stereo.fill): from the frames around where they show it,
else from the background beside the hole; never across a cut; the same pixels however the video is cut."""

import numpy as np
import pytest

from stereo3d.stereo import fill, warp
from stereo3d.stereo.fill import FrameWindow, windowed
from stereo3d.stereo.warp import Renderer, StereoSettings

WIDTH, HEIGHT = 96, 40
SETTINGS = StereoSettings(divergence_pct=10.0, convergence=0.5, edge_dilate_px=0, depth_upsample="bilinear")


def background():
    """A still, textured far wall (blocks of 2 x 2 px of their own colour: a fill can be told apart from the truth,
    and the optical flow finds the wall still)."""
    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, (HEIGHT // 2, WIDTH // 2, 3), dtype=np.uint8)
    return np.repeat(np.repeat(blocks, 2, axis=0), 2, axis=1)


def moving_box(index, speed=6, wall=None):
    """Frame ``index``: a flat grey box, nearer than the screen, moving right over the still wall."""
    frame = (background() if wall is None else wall).copy()
    near = np.zeros((HEIGHT, WIDTH), np.float32)
    x0 = 20 + speed * index
    frame[8:32, x0 : x0 + 16] = 200
    near[8:32, x0 : x0 + 16] = 1.0
    return frame, near


def render_with_neighbours(frames, first=0, end=None, reach=4, threads=None):
    end = len(frames) if end is None else end
    items = ((i, f, n) for i, (f, n) in enumerate(frames) if first - reach <= i < end + reach)
    out = {}
    with Renderer("cpu", threads=threads) as renderer:
        for index, frame, near, neighbours in windowed(items, reach, first, end):
            out[index] = [view.copy() for view in renderer.render_stereo(frame, near, SETTINGS, neighbours=neighbours)]
    return out


def test_a_hole_takes_the_background_that_the_frames_around_show():
    # Divergence 12 px, screen at near 0.5: the wall (near 0) moves 3 px left in the left eye, the box (near 1) 3 px
    # right; the 6 columns of wall the left eye sees on the box's left (targets 35..40 in frame 3, box at 38..53)
    # lie behind the box in the source frame, and are the wall 3 px to their right. The box moving right uncovers
    # them in the frames after.
    settings = StereoSettings(divergence_pct=12.5, convergence=0.5, edge_dilate_px=0, depth_upsample="bilinear")
    frames = [moving_box(i) for i in range(7)]
    items = ((i, f, n) for i, (f, n) in enumerate(frames))
    with Renderer("cpu") as renderer:
        for _index, frame, near, neighbours in windowed(items, 4, 3, 4):
            left, right = renderer.render_stereo(frame, near, settings, neighbours=neighbours)
    wall = background()
    hidden = slice(35, 41)
    assert np.array_equal(left[8:32, hidden], wall[8:32, 38:44])
    alone, _ = Renderer("cpu").render_stereo(*frames[3], settings)  # no other frames: the background beside it
    assert not np.array_equal(alone[8:32, hidden], wall[8:32, 38:44])
    assert not (alone[8:32, hidden] == wall[8:32, 38:44]).all(axis=(1, 2)).any()  # no row of it is the wall


def post_and_passer(present: bool):
    """A still shot: a near post (columns 40..47) before a flat far wall, and, where ``present``, something at the
    screen's depth just left of it (columns 34..39). In the left eye the post moves 3 px right: its hole (columns
    37..42) lies on its left, where the wall or the passer is the background beside it."""
    frame = np.full((HEIGHT, WIDTH, 3), WALL, np.uint8)
    near = np.zeros((HEIGHT, WIDTH), np.float32)
    frame[:, 40:48], near[:, 40:48] = 200, 1.0
    if present:
        frame[:, 34:40], near[:, 34:40] = PASSER, 0.5
    return frame, near


WALL, PASSER = 50, 120


@pytest.mark.parametrize("passing", [2, 7])
def test_a_hole_beside_a_passing_subject_keeps_the_background_most_frames_show(passing):
    # Frame 4 and its 8 neighbours: the passer stands beside the post's hole in ``passing`` of the 9 frames (frame 4
    # among them). For two frames it is not the background there (the hole would flash with its colour); for
    # seven it is.
    settings = StereoSettings(divergence_pct=12.5, convergence=0.5, edge_dilate_px=0, depth_upsample="bilinear")
    shown = range(4 - passing // 2, 4 - passing // 2 + passing)
    frames = [post_and_passer(i in shown) for i in range(9)]
    items = ((i, f, n) for i, (f, n) in enumerate(frames))
    with Renderer("cpu") as renderer:
        for _index, frame, near, neighbours in windowed(items, 4, 4, 5):
            left, _right = renderer.render_stereo(frame, near, settings, neighbours=neighbours)
    assert (left[:, 40:43] == (PASSER if passing > 4 else WALL)).all()


def test_no_frame_across_a_cut_fills_a_hole():
    window = FrameWindow(reach=2)
    frames = [moving_box(i) for i in range(3)]
    other_shot = np.full((HEIGHT, WIDTH, 3), 30, np.uint8), np.zeros((HEIGHT, WIDTH), np.float32)
    for index, (frame, near) in enumerate([*frames, other_shot, other_shot]):
        window.push(index, frame, near)
    assert list(window.neighbours(2).steps) == [-1, -2]  # frames 3 and 4 are another shot
    assert sorted(window.neighbours(1).steps) == [-1, 1]


def test_the_frame_pushed_while_one_renders_takes_no_slot_that_it_reads():
    # While frame i renders, frame i + reach + 1 is pushed into the window's rings on another thread: the slot it
    # goes into must be none that frame i's neighbours (or frame i itself) are read from.
    reach = 3
    frames = [moving_box(i, speed=4) for i in range(12)]
    items = ((i, f, n) for i, (f, n) in enumerate(frames))
    seen = 0
    for index, _frame, _near, neighbours in windowed(items, reach, 0, len(frames)):
        size = neighbours.frames.shape[0]
        read = {*neighbours.slots.tolist(), index % size}
        if index + reach + 1 < len(frames):
            assert (index + reach + 1) % size not in read, index
            seen += 1
    assert seen == len(frames) - reach - 1


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("first,end", [(0, 9), (3, 6), (5, 9)])
def test_a_segment_fills_its_holes_as_the_whole_video_does(first, end, threaded, monkeypatch):
    # Threaded: each frame pushed into the window on its own thread while the frames before it render, as frames of
    # 256x256 and more are (these are smaller).
    monkeypatch.setattr(fill, "THREADED_PUSH_PIXELS", 0 if threaded else fill.THREADED_PUSH_PIXELS)
    frames = [moving_box(i, speed=4) for i in range(9)]
    whole = render_with_neighbours(frames)
    segment = render_with_neighbours(frames, first, end)
    assert sorted(segment) == list(range(first, end))
    for index in range(first, end):
        for a, b in zip(whole[index], segment[index], strict=True):
            assert np.array_equal(a, b), index


@pytest.mark.parametrize("threads", [2, 5])
def test_holes_are_filled_the_same_on_any_number_of_render_threads(threads, monkeypatch):
    # The render threads fill bands of rows, and a hole pixel's smoothing reads the rows around it, which may be
    # another band's: it must see them filled (from other frames, or their repeat), never half done.
    monkeypatch.setattr(warp, "_PARALLEL_MIN_PIXELS", 0)  # these small frames in bands too (5 threads: 5 a view)
    frames = [moving_box(i, speed=4) for i in range(9)]
    alone, banded = render_with_neighbours(frames, threads=1), render_with_neighbours(frames, threads=threads)
    assert any((view != frames[index][0]).any() for index in alone for view in alone[index])
    for index in alone:
        for a, b in zip(alone[index], banded[index], strict=True):
            assert np.array_equal(a, b), index


def test_holes_of_a_still_shot_are_filled_the_same_in_every_frame():
    frames = [moving_box(0) for _ in range(5)]  # nothing moves
    views = render_with_neighbours(frames)
    for index in range(1, 5):
        assert np.array_equal(views[index][0], views[0][0]) and np.array_equal(views[index][1], views[0][1])


@pytest.mark.parametrize("rows", [8, 12, 15])
def test_a_picture_under_sixteen_rows_moving_renders_with_the_frames_around(rows):
    # OpenCV's DIS optical flow crashed the whole process (a segmentation fault) on grey pictures of 8 to 15 rows: a
    # strip of video, or a frame whose grey copy (at most 320 wide) is that short. Such pictures get no flow.
    rng = np.random.default_rng(rows)
    wall = rng.integers(0, 256, (rows, 80, 3), dtype=np.uint8)
    items = []
    for index in range(4):
        frame = np.roll(wall, 3 * index, axis=1)
        near = np.zeros((rows, 80), np.float32)
        near[:, 30 + 2 * index : 44 + 2 * index] = 1.0
        items.append((index, frame, near))
    with Renderer("cpu", threads=1) as renderer:
        for _, frame, near, around in windowed(iter(items), 2, 0, 4):
            assert not around.flows.any()
            left, right = renderer.render_stereo(frame, near, SETTINGS, neighbours=around)
            assert left.shape == right.shape == frame.shape
