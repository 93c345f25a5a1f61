"""Automatic convergence (stereo3d.stereo.convergence): the screen plane on each shot's subject, eased inside a shot,
reset at cuts, and never letting content come further in front of the screen than the limit."""

import numpy as np

from stereo3d.stereo import convergence


def floor_with_figure(figure_near=0.4, figure_x=0.5, size=(72, 128)):
    """A floor receding to a far wall (near growing toward the bottom) with a figure standing on it."""
    height, width = size
    near = np.zeros(size, np.float32)
    horizon = height // 3
    near[horizon:] = np.linspace(0.1, 0.9, height - horizon)[:, None]
    x0 = int(figure_x * width) - 6
    near[horizon - 10 : horizon + 20, x0 : x0 + 12] = figure_near
    return near


def test_the_subject_is_the_figure_in_the_middle_not_the_nearer_floor():
    near = floor_with_figure()
    assert abs(convergence.subject_near(near) - 0.4) < 0.02
    assert convergence.front_near(near) > 0.8  # the floor is what comes nearest


def test_a_figure_that_moves_draws_the_eye_from_one_that_does_not():
    still = floor_with_figure(0.4, 0.35)
    still[20:40, 90:102] = 0.45  # a second figure, on the right
    moved = still.copy()
    moved[20:40, 90:102] = 0.0
    moved[20:40, 96:108] = 0.45  # ...which has moved
    assert abs(convergence.subject_near(moved, previous=still) - 0.45) < 0.02


def test_cuts_are_found_from_the_picture_changes():
    changes = np.array([np.nan, 0.01, 0.012, 0.3, 0.01, 0.011, 0.2, 0.02])
    assert list(convergence.shots_of(changes)) == [0, 0, 0, 1, 1, 1, 2, 2]


def test_the_plane_eases_within_a_shot_and_jumps_at_a_cut():
    shots = np.repeat([0, 1], 48)
    subjects = np.concatenate([np.full(48, 0.3), np.full(48, 0.7)])
    subjects[10:14] = 0.6  # a brief wrong guess inside the first shot
    planes = convergence.plan(subjects, np.zeros(96), shots, fps=24.0, divergence_pct=2.0)
    inside = np.abs(np.diff(planes))[shots[1:] == shots[:-1]]
    assert inside.max() < 0.01  # no step inside a shot: 0.02 % of the width at 2 % divergence
    assert abs(planes[47] - 0.3) < 0.01 and abs(planes[48] - 0.7) < 1e-9  # the new shot's plane on its first frame
    assert planes[12] < 0.45  # the brief guess is eased away


def test_nothing_comes_further_in_front_than_the_limit():
    shots = np.zeros(60, np.int64)
    subjects = np.full(60, 0.2)
    fronts = np.full(60, 0.5)
    fronts[30:34] = 0.95  # something flies close past the camera
    planes = convergence.plan(subjects, fronts, shots, fps=24.0, divergence_pct=2.0, front_limit_pct=1.0)
    in_front_pct = (fronts - planes) * 2.0
    assert in_front_pct.max() <= 1.0 + 1e-9
    assert np.abs(np.diff(planes)).max() <= convergence.MAX_STEP + 1e-9  # rising to it without a jump
    assert abs(planes[0] - 0.2) < 1e-9  # elsewhere on the subject
    assert (planes >= 0).all() and (planes <= 1).all()
