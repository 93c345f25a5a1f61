"""Where the preview's clips lie in a video: a few short frame ranges spread over it, each started on the segment
grid where that grid allows, so that its depth is the first frames of a full-run depth job (which the full run then
continues instead of computing them again: ``stereo3d.stages.preview``)."""

from __future__ import annotations

from dataclasses import dataclass

from stereo3d.io.mapstore import CHUNK_FRAMES
from stereo3d.workflow.paths import frame_ranges, segment_name


@dataclass(frozen=True)
class Clip:
    start: int  # the clip's first frame in the video
    count: int
    # The full run's depth segment (start, count) whose first frames the clip is, or None: its depth is its own.
    segment: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        """The clip's ``{seg}`` (frame range) in the preview's paths."""
        return segment_name(self.start, self.count)

    @property
    def shared_frames(self) -> int:
        """Frames of its segment's depth the preview computes for the full run: the clip's, up to a whole chunk
        (a store is continued after its last complete chunk)."""
        return -(-self.count // CHUNK_FRAMES) * CHUNK_FRAMES


def preview_clips(frame_count: int, fps: float, clips: int, seconds: float, segment_frames: int) -> list[Clip]:
    """``clips`` clips of ``seconds`` each (at least one frame, at most the video), centred on evenly spread
    points of the video (the middles of ``clips`` equal parts); a clip that would overlap an earlier one moves just
    past it, or is left out where the video has no room left (a video shorter than the clips gets fewer).

    A clip moves to the start of the nearest depth segment (``segment_frames``, as the full run cuts the video)
    when that start lies within its part of the video, no other clip took it, and the segment is longer than the
    clip's whole chunks (the preview leaves that segment's depth unfinished; a segment it would finish is not
    shared). With ``segments.frames: 0`` (one segment) only a clip near the video's start can share its depth."""
    count = max(1, min(frame_count, round(seconds * fps)))
    segments = frame_ranges(frame_count, segment_frames)
    part = frame_count / clips
    chosen: list[Clip] = []
    taken: set[int] = set()
    for k in range(clips):
        start = min(max(0, round((k + 0.5) * part - count / 2)), frame_count - count)
        clip = Clip(start, count)
        candidates = [s for s in segments if s[1] > clip.shared_frames and s[0] not in taken]
        if candidates:
            nearest = min(candidates, key=lambda s: abs(s[0] - start))
            if abs(nearest[0] - start) <= part / 2 and nearest[0] + count <= frame_count:
                clip = Clip(nearest[0], count, nearest)
        ahead = [c for c in chosen if c.start < clip.start + clip.count and clip.start < c.start + c.count]
        if ahead:  # past the clips it would overlap, with depth of its own, where the video leaves room
            clip = Clip(max(c.start + c.count for c in ahead), count)
            if clip.start + count > frame_count or any(
                c.start < clip.start + count and clip.start < c.start + c.count for c in chosen
            ):
                continue
        taken.add(clip.start)
        chosen.append(clip)
    return sorted(chosen, key=lambda c: c.start)


def grid_still(clips: list[Clip]) -> tuple[Clip, int]:
    """The clip and the frame (in the video) whose still the settings grid shows: the middle of the middle clip."""
    clip = clips[len(clips) // 2]
    return clip, clip.start + clip.count // 2
