"""The join stage: encoded segments → one stream without re-encoding → muxed with the source's streams.

The concatenation itself is ``stereo3d.io.concat``, which a render job also uses to put its pieces together."""

from __future__ import annotations

import logging
from pathlib import Path

from stereo3d.io.atomic import temp_path_for
from stereo3d.io.concat import concat_video
from stereo3d.io.mux import mux_with_source

log = logging.getLogger(__name__)


def join_segments(
    segments: list[str | Path],
    starts: list[int],
    source: str | Path,
    out: str | Path,
    probe: dict,
    keep_subtitles: bool = True,
) -> Path:
    """Concatenate the encoded ``segments`` (frame ranges beginning at ``starts``) and mux the result
    with every audio/subtitle/chapter stream of ``source`` into ``out`` (written atomically; the
    subtitle tracks only with ``keep_subtitles``)."""
    out = Path(out)
    if len(segments) != len(starts):
        raise ValueError(f"{len(segments)} segments but {len(starts)} start frames")
    if len(segments) == 1:
        return mux_with_source(segments[0], source, out, probe, keep_subtitles=keep_subtitles)
    joined = temp_path_for(out.with_name(out.stem + ".joined.mkv"))
    try:  # an intermediate beside the result, never left behind
        concat_video(segments, starts, probe, joined)
        result = mux_with_source(joined, source, out, probe, keep_subtitles=keep_subtitles)
    finally:
        joined.unlink(missing_ok=True)
    log.info("joined %d segments into %s", len(segments), out)
    return result
