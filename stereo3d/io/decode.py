"""Frame-exact streaming decode through PyAV, with the timeline a player shows.

A reader delivers frames ``[start, start + count)`` of the probe's timeline (``stereo3d.io.probe``), each the
picture a player shows at that frame's time: the last picture whose presentation time is not after it. Decoded
pictures are put back in presentation order first (a decoder may deliver them out of order where a stream's
first packets are odd), so a frame is never taken for its neighbour; where a picture the timeline lists does not
come out of the decoder (a damaged packet, a file cut mid-GOP), the picture before it is shown in its place, as a
player would, and the reader says so once in the log instead of failing the video.

Two background threads keep the caller fed: one demuxes and decodes (FFmpeg's own decoder threads do the heavy
part, outside Python's lock), one converts pictures to RGB arrays (swscale, also outside it), through bounded
queues, so memory holds a few frames, never a video. Frames are RGB ``uint8`` arrays ``[H, W, 3]`` in display
orientation and square pixels (``uint16`` where asked, for deep sources).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import os
import queue
import threading
from collections.abc import Iterable, Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.pipes import END, patient_get, patient_put

log = logging.getLogger(__name__)

INTERLACED = frozenset({"tt", "bb", "tb", "bt"})  # probe field orders (FFmpeg's names) that mean interlaced
# Pictures held back to put a decoder's output in presentation order: more than any B-frame pyramid reorders.
REORDER_PICTURES = 16
# How far before a key frame to seek in a container without an index (MPEG-TS, PS): the search lands near the
# target on any packet, and decoding must begin at or before the key frame.
SEARCH_MARGIN_S = 2.0
# Key frames enough to sample a video by (``sample_frames``); with fewer, the frames between are decoded too.
KEY_SAMPLES = 8
# Pictures of at most this many pixels as delivered (a depth model's input, a small video) are converted on one
# thread: swscale's slices on several threads (PyAV's default since 17) cost more than they share out at that size
# (2 cores, 1080p to 518x292, bench P10: 10 % of the reader's time, 8 % of its CPU), while a full-size picture
# converts faster on them (10-bit 1080p: 9 %).
ONE_THREAD_PIXELS = 1 << 19
# Clockwise turns a player applies (the probe's ``rotation``) as numpy's counter-clockwise quarter turns.
_QUARTER_TURNS = {0: 0, 90: -1, 180: 2, 270: 1}


class FrameReader:
    """Stream frames ``[start, start + count)`` (presentation order) of a probed video as RGB arrays.

    ``probe`` is ``probe_video``'s result for ``path``. ``size=(width, height)`` scales (area averaging when
    shrinking, bicubic when enlarging); otherwise frames have the probe's display size (rotation applied,
    non-square pixels scaled to square ones the same way). ``crop``: an area of the frame in display pixels
    (``stereo3d.stereo.bars.Area``: the picture inside baked-in bars), cut out of the decoded picture before it
    is scaled; frames then have that area's size unless ``size`` is given. Use as a context manager; leaving
    early stops the threads. Raises ``BadVideo`` when the file cannot be read or no picture comes out for the
    frames asked.
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
        crop=None,
    ):
        self.path = Path(path)
        video = probe["video"]
        total = video["frame_count"]
        if count is None:
            count = total - start
        if not (0 <= start <= total and 0 <= count and start + count <= total):
            raise ValueError(f"frames [{start}, {start + count}) are outside the video's {total} frames")
        self.start, self.count = start, count
        shown = (video["display_width"], video["display_height"]) if crop is None else (crop.width, crop.height)
        self.width, self.height = size if size is not None else shown
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"frame size must be positive, not {self.width}x{self.height}")
        # deep: RGB uint16 (rgb48le) so that 10-bit and deeper sources keep their precision through rendering.
        self.dtype = np.dtype(np.uint16 if deep else np.uint8)
        self._format = "rgb48le" if deep else "rgb24"
        self._video = video
        self._targets = _target_ticks(probe, start, count)
        self._seek = _seek_tick(probe, start)
        self._search = not _has_index(probe.get("container", ""))
        self._conversion = _Conversion(video, (self.width, self.height), self._format, crop)
        self._pictures: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._delivered = 0
        self.decoded = 0  # pictures decoded so far (a reader left early stops decoding)
        self._threads: list[threading.Thread] = []
        self._started = self._finished = False

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
        """Stop the threads (if still running); safe to call twice."""
        self._finished = True
        self._stop.set()
        self._join()

    # --- the two threads ------------------------------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self._started or self._finished:
            return
        self._started = True
        if self.count == 0:
            self._queue.put(END)
            return
        self._threads = [
            threading.Thread(target=self._decode, name="frame-decoder", daemon=True),
            threading.Thread(target=self._convert, name="frame-converter", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _decode(self) -> None:
        """Pick the picture shown at each target time and hand it to the converter (the same picture again for
        a frame that repeats it)."""
        try:
            with av.open(os.fspath(self.path), metadata_errors="ignore") as container:
                stream = container.streams[self._video["index"]]
                stream.thread_type = "AUTO"
                pictures = _in_presentation_order(self._pictures_from(container, stream))
                shown, missed = None, 0
                upcoming = next(pictures, None)
                for target in self._targets:
                    while upcoming is not None and upcoming.pts <= target:
                        shown, upcoming = upcoming, next(pictures, None)
                    if shown is None:  # nothing decoded at or before the first target: the first picture after
                        shown, upcoming = upcoming, next(pictures, None)
                    if shown is None:
                        raise BadVideo(self.path, f"decoding {self._span()}: no picture came out of the decoder")
                    missed += shown.pts != target
                    if not self._put(self._pictures, shown):
                        return
                if missed:
                    log.warning(
                        "%s: %s: %d of %d frames have no picture of their own (shown as the picture before, as a "
                        "player does)",
                        self.path.name, self._span(), missed, self.count,
                    )  # fmt: skip
        except BaseException as exc:  # handed to the consumer thread, which raises it
            self._error = exc
        self._put(self._pictures, END)

    def _pictures_from(self, container, stream) -> Iterator:
        """Decoded (and, for interlaced sources, deinterlaced) pictures from the key frame before the first target
        on, as the decoder delivers them, each with a presentation time."""
        first = self._targets[0]
        margin = round(SEARCH_MARGIN_S / stream.time_base) if self._search else 0
        while True:
            if self._seek is not None:
                container.seek(max(self._seek - margin, 0), stream=stream, backward=True, any_frame=False)
            pictures = self._decoded(container, stream)
            head = next(pictures, None)
            if head is None or self._seek is None or head.pts <= first or self._seek - margin <= 0:
                break
            # The search landed after the key frame the targets start from: look again, further back.
            pictures.close()
            margin = 2 * margin + round(SEARCH_MARGIN_S / stream.time_base)
        if head is not None:
            yield head
            yield from pictures

    def _decoded(self, container, stream) -> Iterator:
        deinterlace = _Deinterlacer(stream) if self._video.get("field_order") in INTERLACED else None
        last_pts = None
        errors = 0
        for packet in container.demux(stream):
            if self._stop.is_set():
                return
            try:
                frames = packet.decode()
            except av.FFmpegError as exc:
                errors += 1  # a damaged packet: its picture will be missing, the next may decode
                if errors == 1:
                    log.warning("%s: %s: skipping a packet the decoder refused (%s)", self.path.name, self._span(),
                                getattr(exc, "strerror", None) or exc)  # fmt: skip
                continue
            for frame in deinterlace.filter(frames) if deinterlace else frames:
                if frame.pts is None:  # a stream without timestamps: the next tick after the last
                    frame.pts = 0 if last_pts is None else last_pts + 1
                last_pts = frame.pts
                self.decoded += 1
                yield frame
        if deinterlace is not None:
            yield from deinterlace.flush()

    def _convert(self) -> None:
        try:
            while True:
                # The decoder stops without a last item when the reader is closed early: wait patiently.
                item = patient_get(self._pictures, lambda: not self._stop.is_set())
                if item is END:
                    break
                # A picture shown again (no picture of its own for that frame) is converted again rather than
                # shared: the caller owns every array it gets, and may write into it or hand it on.
                if not self._put(self._queue, self._conversion(item)):
                    return
        except BaseException as exc:
            self._error = self._error or exc
        self._put(self._queue, END)

    # --- helpers -------------------------------------------------------------------------------------------
    def _put(self, target: queue.Queue, item) -> bool:
        return patient_put(target, item, lambda: not self._stop.is_set())

    def _span(self) -> str:
        return f"frames {self.start}..{self.start + self.count - 1}"

    def _finish(self) -> None:
        self._finished = True
        self._join()
        if self._error is not None:
            if isinstance(self._error, BadVideo):
                raise self._error
            cause = getattr(self._error, "strerror", None) or self._error
            raise BadVideo(self.path, f"decoding {self._span()}: {cause}") from self._error
        if self._delivered != self.count:
            raise BadVideo(self.path, f"decoding {self._span()}: got {self._delivered} of {self.count} frames")

    def _join(self) -> None:
        # Unblock threads waiting on a full queue, then let them end.
        for pending in (self._queue, self._pictures):
            while True:
                try:
                    pending.get_nowait()
                except queue.Empty:
                    break
        for thread in self._threads:
            thread.join(timeout=10)


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


class _Conversion:
    """A decoded picture → the RGB array the reader delivers: cut to the crop area if any (FFmpeg's crop filter,
    which only moves the planes' pointers), scaled to the asked size in one pass from the coded picture (area
    averaging when shrinking, bicubic otherwise, as swscale's own default for a format change), then turned
    upright."""

    def __init__(self, video: dict, size: tuple[int, int], pix_fmt: str, crop=None):
        self.turns = _QUARTER_TURNS[video.get("rotation", 0) % 360]
        width, height = size
        self.coded_size = (height, width) if self.turns in (1, -1) else (width, height)  # before turning
        coded = (video.get("width", self.coded_size[0]), video.get("height", self.coded_size[1]))
        self.crop = None if crop is None else _coded_crop(video, crop, self.turns)
        if self.crop is not None:
            coded = self.crop[:2]
        shrink = self.coded_size[0] * self.coded_size[1] < coded[0] * coded[1]
        self.interpolation = "AREA" if shrink else "BICUBIC"
        self.pix_fmt = pix_fmt
        self.threads = 1 if width * height <= ONE_THREAD_PIXELS else 0  # 0: swscale's choice (a thread a core)
        self._graph = None

    def __call__(self, frame) -> np.ndarray:
        width, height = self.coded_size
        if self.crop is not None:
            frame = self._cropped(frame)
        rgb = frame.reformat(width=width, height=height, format=self.pix_fmt, interpolation=self.interpolation,
                             threads=self.threads)  # fmt: skip
        array = rgb.to_ndarray()
        return np.ascontiguousarray(np.rot90(array, self.turns)) if self.turns else array

    def _cropped(self, frame):
        if self._graph is None:  # built for the first picture's format (the decoder's, known only then)
            self._graph = av.filter.Graph()
            source = self._graph.add_buffer(width=frame.width, height=frame.height, format=frame.format.name,
                                            time_base=Fraction(1, 1000))  # fmt: skip
            width, height, x, y = self.crop
            cut = self._graph.add("crop", f"w={width}:h={height}:x={x}:y={y}")
            sink = self._graph.add("buffersink")
            source.link_to(cut)
            cut.link_to(sink)
            self._graph.configure()
        self._graph.push(frame)
        return self._graph.pull()


def _coded_crop(video: dict, area, turns: int) -> tuple[int, int, int, int] | None:
    """(width, height, x, y) in coded pixels of an area given in display pixels: the display's turn undone, then
    its non-square pixels (the display width is the coded one scaled by the SAR). None for the whole frame."""
    shown_w, shown_h = video["display_width"], video["display_height"]
    if (area.x, area.y, area.width, area.height) == (0, 0, shown_w, shown_h):
        return None
    x, y, width, height = area.x, area.y, area.width, area.height
    upright_w, upright_h = (shown_h, shown_w) if turns in (1, -1) else (shown_w, shown_h)  # before turning
    if turns == 2:
        x, y = upright_w - x - width, upright_h - y - height
    elif turns == -1:  # turned clockwise for display
        x, y, width, height = y, upright_h - x - width, height, width
    elif turns == 1:
        x, y, width, height = upright_w - y - height, x, height, width
    coded_w = video.get("width", upright_w)
    left, right = round(x * coded_w / upright_w), round((x + width) * coded_w / upright_w)
    return right - left, height, left, y


class _Deinterlacer:
    """FFmpeg's bwdif filter, one progressive frame per frame (times and count kept), touching only frames flagged
    interlaced: woven fields would reach DA3 as texture and the warp would tear them."""

    def __init__(self, stream):
        self.time_base = stream.time_base
        self.graph = av.filter.Graph()
        source = self.graph.add_buffer(template=stream)
        bwdif = self.graph.add("bwdif", "mode=send_frame:parity=auto:deint=interlaced")
        sink = self.graph.add("buffersink")
        source.link_to(bwdif)
        bwdif.link_to(sink)
        self.graph.configure()

    def filter(self, frames) -> Iterator:
        for frame in frames:
            self.graph.push(frame)
            yield from self._pull()

    def flush(self) -> Iterator:
        self.graph.push(None)
        yield from self._pull()

    def _pull(self) -> Iterator:
        while True:
            try:
                frame = self.graph.pull()
            except (BlockingIOError, av.EOFError):
                return
            if frame.time_base != self.time_base and frame.pts is not None:
                # bwdif doubles the time base (it could send a frame per field): back to the stream's ticks.
                frame.pts = round(frame.pts * frame.time_base / self.time_base)
                frame.time_base = self.time_base
            yield frame


def _in_presentation_order(pictures: Iterator) -> Iterator:
    """The pictures sorted by presentation time, holding back ``REORDER_PICTURES`` of them."""
    held: list = []
    order = itertools.count()  # ties keep decoder order
    for picture in pictures:
        heapq.heappush(held, (picture.pts, next(order), picture))
        if len(held) > REORDER_PICTURES:
            yield heapq.heappop(held)[2]
    while held:
        yield heapq.heappop(held)[2]


def _target_ticks(probe: dict, start: int, count: int) -> list[int]:
    """The file's own timestamps (stream ticks) of frames ``[start, start + count)`` of the timeline."""
    video = probe["video"]
    tb = Fraction(video["time_base"])
    first = round(Fraction(video.get("pts_offset_s", 0.0)) / tb)
    return [first + round(Fraction(t) / tb) for t in probe["frame_pts_s"][start : start + count]]


def _seek_tick(probe: dict, start: int) -> int | None:
    """Where to seek for frame ``start``: the key frame at or before it (None: decode from the beginning)."""
    if start == 0:
        return None
    keyframes = probe["video"].get("keyframes") or [0]
    at = bisect.bisect_right(keyframes, start) - 1
    key = keyframes[at] if at >= 0 else 0
    return _target_ticks(probe, key, 1)[0] if key > 0 else None


def _has_index(container: str) -> bool:
    """Whether the demuxer seeks through an index of key frames (lands exactly) rather than by searching."""
    return any(name in container.split(",") for name in ("mov", "mp4", "matroska", "webm", "avi"))


def sample_frames(path: str | Path, probe: dict, count: int) -> Iterator[tuple[int, np.ndarray]]:
    """About ``count`` frames spread evenly over a probed video, as ``(index, RGB frame)`` at its display size,
    decoded cheaply, through one opening of the file (a long MP4's index alone takes a good part of a second to
    read). Each sample moves to the key frame nearest it: a seek and one picture each, whatever the video's
    length (a film's key frames are seconds apart, so its samples stay spread over it). Only a video with fewer
    than ``KEY_SAMPLES`` key frames to sample (a short clip, a stream with few key frames) is sampled where asked,
    the frames between decoded from the key frame before them, one pass per key frame. Approximate where a
    container cannot seek exactly (the first picture at or after each target is taken), and not deinterlaced:
    samples for a look at the whole video, not the frames a stage works on (``FrameReader``)."""
    video = probe["video"]
    total = video["frame_count"]
    count = max(1, min(count, total))
    keyframes = [key for key in (video.get("keyframes") or [0]) if key < total] or [0]
    targets = sorted({min(total - 1, int((k + 0.5) * total / count)) for k in range(count)})
    nearest = set()
    for target in targets:
        at = bisect.bisect_right(keyframes, target)
        nearest.add(min(keyframes[max(0, at - 1) : at + 1], key=lambda key: abs(key - target)))
    picks = nearest if len(nearest) >= min(len(targets), KEY_SAMPLES) else set(targets)
    by_key: dict[int, list[int]] = {}
    for index in sorted(picks):
        by_key.setdefault(keyframes[bisect.bisect_right(keyframes, index) - 1], []).append(index)
    conversion = _Conversion(video, (video["display_width"], video["display_height"]), "rgb24")
    margin_s = 0.0 if _has_index(probe.get("container", "")) else SEARCH_MARGIN_S
    try:
        with av.open(os.fspath(path), metadata_errors="ignore") as container:
            stream = container.streams[video["index"]]
            for key, indices in by_key.items():
                wanted = list(zip(indices, _ticks(probe, indices), strict=True))
                start = _target_ticks(probe, key, 1)[0] - round(margin_s / stream.time_base)
                container.seek(max(start, 0), stream=stream, backward=True, any_frame=False)
                yield from _decode_until(container, stream, wanted, conversion)
    except av.FFmpegError as exc:
        raise BadVideo(path, f"sampling frames: {getattr(exc, 'strerror', None) or exc}") from exc


def _decode_until(container, stream, wanted: list[tuple[int, int]], conversion) -> Iterator[tuple[int, np.ndarray]]:
    """From where the container was sought: the first picture at or after each wanted (index, tick), in order."""
    for packet in container.demux(stream):
        try:
            frames = packet.decode()
        except av.FFmpegError:
            continue  # a damaged packet: the next picture serves
        for frame in frames:
            if frame.pts is None or frame.pts < wanted[0][1]:
                continue
            picture = conversion(frame)
            while wanted and frame.pts >= wanted[0][1]:
                yield wanted.pop(0)[0], picture
            if not wanted:
                return


def _ticks(probe: dict, indices: list[int]) -> list[int]:
    return [_target_ticks(probe, index, 1)[0] for index in indices]
