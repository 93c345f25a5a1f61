"""Frame-exact streaming decode through an ffmpeg pipe.

Decoding runs in an ffmpeg process drained by a background thread through a bounded queue, so ffmpeg works while
the caller runs inference, and memory holds only ``prefetch`` frames, never a video. Frames are RGB ``uint8``
arrays ``[H, W, 3]`` in display orientation and square pixels (``uint16`` where asked, for deep sources).
"""

from __future__ import annotations

import bisect
import collections
import logging
import queue
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.ffmpeg import ffmpeg_command, ffmpeg_url, last_error_line
from stereo3d.io.pipes import END, drain_lines, patient_put, read_into

log = logging.getLogger(__name__)

INTERLACED = frozenset({"tt", "bb", "tb", "bt"})  # probe field orders (ffmpeg's names) that mean interlaced
_SHOWINFO = re.compile(r"Parsed_showinfo.*\bn:\s*\d+\s+pts:\s*(-?\d+)")
_PROBLEM = re.compile(r"error|invalid|fail|corrupt|missing|truncat|unable|cannot", re.IGNORECASE)


class FrameReader:
    """Stream frames ``[start, start + count)`` (presentation order) of a probed video as RGB uint8 arrays.

    ``probe`` is ``probe_video``'s result for ``path``. ``size=(width, height)`` lets ffmpeg scale (area
    averaging when shrinking, bicubic when enlarging); otherwise frames have the probe's display size (rotation
    applied, non-square pixels scaled to square ones the same way). Use as a context manager; leaving early
    stops ffmpeg. Raises ``BadVideo`` when ffmpeg fails or delivers fewer frames than promised.
    """

    def __init__(
        self,
        path: str | Path,
        probe: dict,
        start: int = 0,
        count: int | None = None,
        size: tuple[int, int] | None = None,
        prefetch: int = 8,
        *,
        deep: bool = False,
    ):
        self.path = Path(path)
        video = probe["video"]
        total = video["frame_count"]
        if count is None:
            count = total - start
        if not (0 <= start <= total and 0 <= count and start + count <= total):
            raise ValueError(f"frames [{start}, {start + count}) are outside the video's {total} frames")
        self.start, self.count = start, count
        self.width, self.height = size if size is not None else (video["display_width"], video["display_height"])
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"frame size must be positive, not {self.width}x{self.height}")
        # deep: RGB uint16 (rgb48le) so that 10-bit and deeper sources keep their precision through rendering.
        self.dtype = np.dtype(np.uint16 if deep else np.uint8)
        self._frame_bytes = self.width * self.height * 3 * self.dtype.itemsize
        self._probe = probe
        self._args = _decode_args(self.path, probe, start, count, size, video, "rgb48le" if deep else "rgb24")
        self._pts: list[int] = []
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._stop = threading.Event()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._error: BaseException | None = None
        self._delivered = 0
        self._proc: subprocess.Popen | None = None
        self._threads: list[threading.Thread] = []
        self._finished = False

    def __len__(self) -> int:
        return self.count

    def __enter__(self) -> FrameReader:
        self._ensure_started()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __iter__(self) -> Iterator[np.ndarray]:
        self._ensure_started()
        return self

    def __next__(self) -> np.ndarray:
        if self._finished:
            raise StopIteration
        self._ensure_started()
        item = self._queue.get()
        if item is END:
            self._finish()
            raise StopIteration
        self._delivered += 1
        return item

    def close(self) -> None:
        """Stop ffmpeg (if still running) and the reader thread; safe to call twice."""
        self._finished = True
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self._join()

    def _ensure_started(self) -> None:
        if self._proc is not None or self._finished:
            return
        if self.count == 0:
            self._queue.put(END)
            return
        self._proc = subprocess.Popen(
            ffmpeg_command(self._args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._threads = [
            threading.Thread(target=self._pump_frames, name="frame-reader", daemon=True),
            threading.Thread(target=_drain_decoder_log, args=(self._proc.stderr, self._stderr, self._pts), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump_frames(self) -> None:
        stdout = self._proc.stdout
        try:
            while not self._stop.is_set():
                frame = np.empty((self.height, self.width, 3), dtype=self.dtype)
                got = read_into(stdout, memoryview(frame).cast("B"))
                if got == 0:
                    break
                if got < self._frame_bytes:
                    raise BadVideo(
                        self.path, f"decoding: ffmpeg stopped mid-frame ({got} of {self._frame_bytes} bytes)"
                    )
                if not self._put(frame):
                    return
        except BaseException as exc:  # handed to the consumer thread, which raises it
            self._error = exc
        self._put(END)

    def _put(self, item) -> bool:
        return patient_put(self._queue, item, lambda: not self._stop.is_set())

    def _finish(self) -> None:
        self._finished = True
        if self._proc is None:
            return
        returncode = self._proc.wait()
        self._join()
        span = f"frames {self.start}..{self.start + self.count - 1}"
        if self._error is not None:
            if isinstance(self._error, BadVideo):
                raise self._error
            raise BadVideo(self.path, f"decoding {span}: {self._error}") from self._error
        if returncode != 0:
            raise BadVideo(self.path, f"decoding {span}: {last_error_line(chr(10).join(self._stderr))}")
        if self._delivered != self.count:
            # At info level ffmpeg's log is mostly the stream layout; only a line naming a problem helps here.
            problems = [line for line in self._stderr if _PROBLEM.search(line)]
            detail = f" (ffmpeg: {last_error_line(chr(10).join(problems))})" if problems else ""
            raise BadVideo(self.path, f"decoding {span}: got {self._delivered} of {self.count} frames{detail}")
        self._check_timestamps(span)

    def _check_timestamps(self, span: str) -> None:
        """Every delivered frame must be the frame the probe lists at that place, or the segment is wrong."""
        if not self._pts:
            log.warning("%s: %s: ffmpeg reported no frame timestamps; frame positions not verified", self.path, span)
            return
        expected, tb = _expected_ticks(self._probe, self.start, self.count)
        for n, (got, want) in enumerate(zip(self._pts, expected, strict=False)):
            if abs(got - want) > 1:
                raise BadVideo(
                    self.path,
                    f"decoding {span}: frame {self.start + n} came out at {float(got * tb):.6f} s instead of "
                    f"{float(want * tb):.6f} s (the file does not seek exactly)",
                )
        # showinfo may see a frame or two more than -frames:v lets out; fewer means some went unreported.
        if len(self._pts) < len(expected):
            raise BadVideo(self.path, f"decoding {span}: {len(self._pts)} timestamps for {len(expected)} frames")

    def _join(self) -> None:
        # Unblock a reader waiting on a full queue, then reap ffmpeg so no zombie is left behind.
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        for thread in self._threads:
            thread.join(timeout=10)
        if self._proc is not None:
            self._proc.wait()
            for stream in (self._proc.stdout, self._proc.stderr):
                if stream is not None:
                    stream.close()


def read_batches(reader: Iterable[np.ndarray], n: int) -> Iterator[np.ndarray]:
    """Group frames into arrays ``[B, H, W, 3]`` of ``n`` frames (the last batch may be shorter)."""
    if n < 1:
        raise ValueError(f"batch size must be at least 1, not {n}")
    batch: list[np.ndarray] = []
    for frame in reader:
        batch.append(frame)
        if len(batch) == n:
            yield np.stack(batch)
            batch = []
    if batch:
        yield np.stack(batch)


def _decode_args(
    path: Path, probe: dict, start: int, count: int, size, video: dict, pix_fmt: str = "rgb24"
) -> list[str]:
    # -copyts keeps the file's own timestamps, so frames are picked by the exact times the probe recorded;
    # showinfo reports each delivered frame's timestamp, which the reader checks against the probe.
    args = ["-loglevel", "info", "-copyts"]
    filters = []
    if start > 0:
        pts, offset = probe["frame_pts_s"], float(video.get("pts_offset_s", video.get("start_pts_s", 0.0)))
        key = _keyframe_at_or_before(video.get("keyframes") or [0], start)
        if key > 0:
            key_s = offset + pts[key]
            if _has_index(probe.get("container", "")):
                # The demuxer's index lands on the last key frame at or before the target: aim just past it.
                after = pts[key + 1] - pts[key] if key + 1 < len(pts) else 0.004
                seek_s = key_s + min(after / 4, 0.001)
            else:
                # No index (MPEG-TS, PS): the search lands near the target on any packet; start well before
                # the key frame so decoding begins at it (undecodable packets before it are dropped).
                seek_s = key_s - 2.0
            seek_s -= float(probe.get("start_s") or 0.0)  # -ss counts from the container start
            if seek_s > 0:
                args += ["-noaccurate_seek", "-ss", f"{seek_s:.6f}"]
        # Half-way between the previous frame and the first wanted one: rounding cannot tip either.
        filters.append(f"select='gte(t\\,{offset + (pts[start - 1] + pts[start]) / 2:.9f})'")
    args += ["-i", ffmpeg_url(path), "-map", f"0:{video['index']}", "-an", "-sn", "-dn"]
    # passthrough: one output frame per decoded frame, whatever the timestamps (VFR must not be evened out).
    args += ["-fps_mode", "passthrough", "-frames:v", str(count)]
    filters.append("showinfo=checksum=0")
    if video.get("field_order") in INTERLACED:
        # ffmpeg hands over interlaced video as woven frames (both fields, full height): the combing would reach
        # DA3 as texture and the warp would tear it. bwdif makes one progressive frame per frame (timestamps and
        # count kept), touching only frames flagged interlaced.
        filters.append("bwdif=mode=send_frame:parity=auto:deint=interlaced")
    # ffmpeg hands over the coded pixels turned upright; non-square ones are scaled to the display size (the
    # probe's policy: square pixels everywhere downstream), straight to ``size`` where one is asked for.
    upright = _upright_size(video)
    target = size if size is not None else (video["display_width"], video["display_height"])
    if size is not None or tuple(target) != upright:
        shrink = target[0] * target[1] <= upright[0] * upright[1]
        filters.append(f"scale={target[0]}:{target[1]}:flags={'area' if shrink else 'bicubic'}")
    filters.append(f"format={pix_fmt}")
    return [*args, "-vf", ",".join(filters), "-f", "rawvideo", "-pix_fmt", pix_fmt, "pipe:1"]


def _upright_size(video: dict) -> tuple[int, int]:
    """The coded size after rotation: what ffmpeg delivers before any scaling (display size where not recorded)."""
    if "width" not in video or "height" not in video:
        return video["display_width"], video["display_height"]
    swap = video.get("rotation", 0) in (90, 270)
    return (video["height"], video["width"]) if swap else (video["width"], video["height"])


def _keyframe_at_or_before(keyframes: list[int], index: int) -> int:
    at = bisect.bisect_right(keyframes, index) - 1
    return keyframes[at] if at >= 0 else 0


def _has_index(container: str) -> bool:
    """Whether the demuxer seeks through an index of key frames (lands exactly) rather than by searching."""
    return any(name in container.split(",") for name in ("mov", "mp4", "matroska", "webm", "avi"))


def _expected_ticks(probe: dict, start: int, count: int) -> tuple[list[int], Fraction]:
    video = probe["video"]
    tb = Fraction(video["time_base"])
    first = round(Fraction(video.get("pts_offset_s", 0.0)) / tb)
    pts = probe["frame_pts_s"][start : start + count]
    return [first + round(Fraction(t) / tb) for t in pts], tb


def _drain_decoder_log(stream, sink: collections.deque, pts: list[int]) -> None:
    """Collect showinfo's frame timestamps apart from the rest of ffmpeg's log."""

    def keep(line: str) -> bool:
        m = _SHOWINFO.search(line)
        if m:
            pts.append(int(m.group(1)))
        return "Parsed_showinfo" not in line

    drain_lines(stream, sink, keep)
