"""Video I/O through ffmpeg pipes: frame-exact streaming decode, pipelined encode, final mux with the source.

Decoding and encoding run in ffmpeg processes fed or drained by a background thread through a bounded queue,
so ffmpeg works while the caller runs inference, and memory holds only ``prefetch`` frames, never a video.
Frames are RGB ``uint8`` arrays ``[H, W, 3]`` in display orientation (``uint16`` where asked, for deep sources).
"""

from __future__ import annotations

import bisect
import collections
import functools
import logging
import queue
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from stereo3d.atomic import atomic_output
from stereo3d.errors import BadVideo, StereoError
from stereo3d.ffmpeg import ffmpeg_command, ffmpeg_url, last_error_line, run_ffmpeg

log = logging.getLogger(__name__)

CONTAINERS = {".mkv": "matroska", ".mp4": "mp4", ".mov": "mov", ".m4v": "mp4"}

# What an .mp4 may carry as is; other audio is re-encoded (AAC), other subtitles converted or left out.
MP4_AUDIO = frozenset({"aac", "mp3", "ac3", "eac3", "opus", "flac", "alac", "mp2", "dts"})
TEXT_SUBTITLES = frozenset({"subrip", "srt", "ass", "ssa", "webvtt", "mov_text", "text"})
MP4_BITMAP_SUBTITLES = frozenset({"dvd_subtitle"})

INTERLACED = frozenset({"tt", "bb", "tb", "bt"})  # probe field orders (ffmpeg's names) that mean interlaced
_SHOWINFO = re.compile(r"Parsed_showinfo.*\bn:\s*\d+\s+pts:\s*(-?\d+)")
_PROBLEM = re.compile(r"error|invalid|fail|corrupt|missing|truncat|unable|cannot", re.IGNORECASE)
_DISK_TROUBLE = re.compile(r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied|"
                           r"File too large", re.IGNORECASE)
_END = object()  # queue sentinel: no more frames
_POLL_S = 0.1  # how often a blocked queue operation looks whether the other side gave up


class FrameReader:
    """Stream frames ``[start, start + count)`` (presentation order) of a probed video as RGB uint8 arrays.

    ``probe`` is ``probe_video``'s result for ``path``. ``size=(width, height)`` lets ffmpeg scale (area
    averaging when shrinking, bicubic when enlarging); otherwise frames have the display size (rotation
    applied). Use as a context manager; leaving early stops ffmpeg. Raises ``BadVideo`` when ffmpeg fails or
    delivers fewer frames than promised.
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
        if item is _END:
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
            self._queue.put(_END)
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
                got = _read_into(stdout, memoryview(frame).cast("B"))
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
        self._put(_END)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

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


class VideoEncoder:
    """Encode RGB frames ``[height, width, 3]`` into a video-only ``out_path`` (.mkv, .mp4 or .mov).

    ``write(frame)`` queues a copy of the frame; a background thread feeds ffmpeg, so encoding overlaps the
    producer. The file appears under its name only on a clean exit; on an exception ffmpeg is killed and
    nothing is left. Frames are uint8, or uint16 with ``depth=16`` (for 10-bit and deeper output; ffmpeg gets
    rgb48le). Timestamps are constant-rate at ``fps_fraction`` (e.g. "24000/1001"), or ``pts_s``: one
    presentation time per frame in seconds (variable frame rate), kept exactly at ``time_base``.

    RGB is converted to YUV with the matrix of ``color`` (a probe's ``video`` dict or any dict with
    ``color_space``, ``color_primaries``, ``color_transfer``), limited range, and the output is tagged with the
    same primaries and transfer: the transfer is never converted, so PQ/HLG (HDR) pictures pass through tagged
    as they came. Unknown or absent colour tags mean BT.709, what players assume for HD and larger.
    """

    def __init__(
        self,
        out_path: str | Path,
        width: int,
        height: int,
        fps_fraction: str,
        codec: str = "libx264",
        crf: int = 18,
        preset: str = "medium",
        pix_fmt: str = "yuv420p",
        extra_args: Sequence[str] = (),
        prefetch: int = 8,
        pts_s: Sequence[float] | None = None,
        *,
        depth: int = 8,
        color: dict | None = None,
        time_base: str = "1/90000",
    ):
        self.out_path = Path(out_path)
        if self.out_path.suffix.lower() not in CONTAINERS:
            raise ValueError(f"{self.out_path}: output must end in one of {', '.join(CONTAINERS)}")
        if width <= 0 or height <= 0:
            raise ValueError(f"frame size must be positive, not {width}x{height}")
        if depth not in (8, 16):
            raise ValueError(f"input depth must be 8 or 16 bits, not {depth}")
        self.width, self.height = width, height
        self.fps = Fraction(fps_fraction)
        self.dtype = np.dtype(np.uint8 if depth == 8 else np.uint16)
        self.frames_written = 0
        self._input_pix_fmt = "rgb24" if depth == 8 else "rgb48le"
        self._pts_s = None if pts_s is None else [float(t) for t in pts_s]
        self._time_base = Fraction(time_base)
        self._encode = _encode_args(codec, crf, preset, pix_fmt, self.out_path.suffix.lower(), extra_args, color)
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._atomic = None
        self._script: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> VideoEncoder:
        self._atomic = atomic_output(self.out_path)
        tmp = self._atomic.__enter__()
        encode = list(self._encode)
        if self._pts_s is not None:
            # Variable frame rate: the filter graph stamps every frame with its own time (a setpts expression
            # indexed by frame number, too long for a command line, so it goes through a file), the encoder
            # keeps the filter's time base, and passthrough stops ffmpeg from evening the rate out.
            vf = encode.index("-vf")
            self._script = tmp.with_name(tmp.name + ".vf")
            timing = _timestamp_filter(self._pts_s, self._time_base)
            self._script.write_text(f"{timing},{encode[vf + 1]}", encoding="utf-8")
            encode[vf : vf + 2] = ["-/vf", str(self._script)]
            encode += ["-fps_mode", "passthrough", "-enc_time_base:v", "filter"]
        args = [
            "-loglevel", "error",
            "-f", "rawvideo", "-pix_fmt", self._input_pix_fmt, "-s", f"{self.width}x{self.height}",
            "-framerate", f"{self.fps.numerator}/{self.fps.denominator}", "-i", "pipe:0",
            "-map", "0:v", *encode,
            "-f", CONTAINERS[self.out_path.suffix.lower()], "-y", ffmpeg_url(tmp),
        ]  # fmt: skip
        try:
            self._proc = subprocess.Popen(
                ffmpeg_command(args), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        except BaseException as exc:
            self._remove_script()
            self._atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._threads = [
            threading.Thread(target=self._feed, name="video-encoder", daemon=True),
            threading.Thread(target=_drain_lines, args=(self._proc.stderr, self._stderr), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def write(self, frame: np.ndarray, *, owned: bool = False) -> None:
        """Queue one RGB frame ``[height, width, 3]`` (uint8, or uint16 at depth 16); blocks while ``prefetch``
        frames are pending. ``owned``: the caller hands the array over and never touches it again (no copy)."""
        if self._proc is None:
            raise RuntimeError("VideoEncoder.write() outside its `with` block")
        if frame.dtype != self.dtype or frame.shape != (self.height, self.width, 3):
            raise ValueError(
                f"{self.out_path}: frame must be {self.dtype} [{self.height}, {self.width}, 3], "
                f"got {frame.dtype} {frame.shape}"
            )
        if self._pts_s is not None and self.frames_written >= len(self._pts_s):
            raise ValueError(f"{self.out_path}: more frames than the {len(self._pts_s)} timestamps given")
        # A copy unless owned: the caller may reuse its buffer while this frame still waits in the queue.
        # rgb48le is little-endian, as numpy's uint16 is on every platform this runs on.
        item = np.ascontiguousarray(frame) if owned else np.array(frame, dtype=self.dtype, order="C", copy=True)
        while True:
            self._raise_if_failed()
            try:
                self._queue.put(item, timeout=_POLL_S)
                break
            except queue.Full:
                continue
        self.frames_written += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                try:
                    self._finish()
                except BaseException as failure:
                    self._abort()
                    self._atomic.__exit__(type(failure), failure, failure.__traceback__)
                    raise
                self._atomic.__exit__(None, None, None)
            else:
                self._abort()
                self._atomic.__exit__(exc_type, exc, tb)
        finally:
            self._remove_script()

    def _remove_script(self) -> None:
        if self._script is not None:
            self._script.unlink(missing_ok=True)

    def _feed(self) -> None:
        stdin = self._proc.stdin
        try:
            while True:
                item = self._queue.get()
                if item is _END or self._stop.is_set():
                    break
                stdin.write(memoryview(item).cast("B"))
        except BaseException as exc:  # BrokenPipeError when ffmpeg died; the reason is on its stderr
            self._error = exc
            self._stop.set()
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _raise_if_failed(self) -> None:
        if self._error is not None or (self._proc is not None and self._proc.poll() not in (None, 0)):
            self._proc.wait()
            for thread in self._threads:
                thread.join(timeout=10)
            raise BadVideo(self.out_path, f"encoding: {last_error_line(chr(10).join(self._stderr))}")

    def _finish(self) -> None:
        if self.frames_written == 0:
            raise BadVideo(self.out_path, "encoding: no frames were written")
        if self._pts_s is not None and self.frames_written != len(self._pts_s):
            raise BadVideo(
                self.out_path, f"encoding: {self.frames_written} frames written for {len(self._pts_s)} timestamps"
            )
        while True:
            self._raise_if_failed()
            try:
                self._queue.put(_END, timeout=_POLL_S)
                break
            except queue.Full:
                continue
        self._threads[0].join()
        returncode = self._proc.wait()
        self._threads[1].join(timeout=10)
        if self._error is not None or returncode != 0:
            raise BadVideo(self.out_path, f"encoding: {last_error_line(chr(10).join(self._stderr))}")

    def _abort(self) -> None:
        self._stop.set()
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            while True:  # let a feeder blocked on get() see the stop
                try:
                    self._queue.put_nowait(_END)
                    break
                except queue.Full:
                    try:
                        self._queue.get_nowait()
                    except queue.Empty:
                        pass
            self._proc.wait()
        for thread in self._threads:
            thread.join(timeout=10)


def mux_with_source(
    video_only: str | Path,
    source: str | Path,
    out_path: str | Path,
    probe: dict,
    extra_args: Sequence[str] = (),
) -> Path:
    """Write ``out_path``: the video stream of ``video_only`` plus every audio stream, the subtitles, chapters
    and global metadata of ``source`` (``probe`` is the source's probe). Streams are copied; where the
    container cannot hold one (.mp4: text subtitles become mov_text, unsupported audio becomes AAC, bitmap
    subtitles other than DVD are left out with a warning). ``extra_args`` go before the output (stereo
    metadata, tags). Written atomically; ``-movflags +faststart`` for .mp4/.mov.

    The video's packets are restamped with the source's exact frame times (``_restamp_bsf``), so the encoded
    video may come in whole milliseconds (Matroska) and still leave with the source's timing, A/V offset
    included.
    """
    out_path = Path(out_path)
    suffix = out_path.suffix.lower()
    if suffix not in CONTAINERS:
        raise ValueError(f"{out_path}: output must end in one of {', '.join(CONTAINERS)}")
    mp4_like = CONTAINERS[suffix] in ("mp4", "mov")
    if not Path(video_only).is_file():
        raise BadVideo(video_only, "encoded video to mux not found")
    args = ["-loglevel", "error", "-i", ffmpeg_url(video_only), "-i", ffmpeg_url(source), "-map", "0:v:0"]
    codecs = ["-c", "copy"]
    for n, audio in enumerate(probe.get("audio", [])):
        args += ["-map", f"1:{audio['index']}"]
        if mp4_like and audio.get("title"):
            # mp4 players show the handler name as the track title.
            codecs += [f"-metadata:s:a:{n}", f"handler_name={audio['title']}", f"-metadata:s:a:{n}", "title="]
        if mp4_like and audio["codec"] not in MP4_AUDIO:
            log.warning("%s: audio stream #%d (%s) cannot go into %s as is; re-encoding it to AAC",
                        source, audio["index"], audio["codec"], suffix)  # fmt: skip
            codecs += [f"-c:a:{n}", "aac", f"-b:a:{n}", "256k"]
    kept = 0
    for sub in probe.get("subtitles", []):
        codec = sub["codec"]
        if mp4_like:
            if codec in TEXT_SUBTITLES:
                target = "mov_text"
            elif codec in MP4_BITMAP_SUBTITLES:
                target = "copy"
            else:
                log.warning(
                    "%s: subtitle stream #%d (%s) cannot go into %s; left out", source, sub["index"], codec, suffix
                )
                continue
        else:
            target = "srt" if codec == "mov_text" else "copy"
        args += ["-map", f"1:{sub['index']}"]
        codecs += [f"-c:s:{kept}", target]
        if mp4_like and sub.get("title"):
            codecs += [f"-metadata:s:s:{kept}", f"handler_name={sub['title']}", f"-metadata:s:s:{kept}", "title="]
        kept += 1
    if not mp4_like:
        args += ["-map", "1:t?"]  # fonts and other attachments that styled subtitles rely on
    args += ["-map_chapters", "1", "-map_metadata", "1", *codecs]
    if mp4_like:
        args += ["-movflags", "+faststart"]
        codec, stereo = _video_stream(video_only)
        if codec == "hevc":
            args += ["-tag:v", "hvc1"]  # Apple and many VR players only play HEVC tagged hvc1 in mp4
        if stereo:
            # The stereo packing (from Matroska StereoMode) becomes an st3d box only when unofficial boxes are
            # allowed; without it ffmpeg drops the signalling silently.
            args += ["-strict", "unofficial"]
    args += [str(a) for a in extra_args]
    with atomic_output(out_path) as tmp:
        # The restamping expression grows with the number of frame-rate changes (VFR), past what a command line
        # holds: ffmpeg reads it from a file beside the output (-/ takes an option's value from a file).
        restamp = tmp.with_name(tmp.name + ".bsf")
        try:
            restamp.write_text(_restamp_bsf(probe), encoding="utf-8")
            run_ffmpeg([*args, "-/bsf:v", ffmpeg_url(restamp), "-f", CONTAINERS[suffix], "-y", ffmpeg_url(tmp)],
                       source, f"muxing into {out_path.name}")  # fmt: skip
        except (BadVideo, OSError) as exc:
            trouble = _DISK_TROUBLE.search(exc.cause if isinstance(exc, BadVideo) else str(exc))
            if trouble:  # the output's filesystem, not the source, is at fault: say so, naming the output
                raise StereoError(out_path, f"cannot write the result: {trouble.group(0)}") from exc
            raise
        finally:
            restamp.unlink(missing_ok=True)
    return out_path


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
    if size is not None:
        shrink = size[0] * size[1] <= video["display_width"] * video["display_height"]
        filters.append(f"scale={size[0]}:{size[1]}:flags={'area' if shrink else 'bicubic'}")
    filters.append(f"format={pix_fmt}")
    return [*args, "-vf", ",".join(filters), "-f", "rawvideo", "-pix_fmt", pix_fmt, "pipe:1"]


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
    try:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            m = _SHOWINFO.search(line)
            if m:
                pts.append(int(m.group(1)))
            elif "Parsed_showinfo" not in line:
                sink.append(line)
    except (OSError, ValueError):
        pass


def resolve_codec(codec: str, pix_fmt: str) -> str:
    """The encoder to use for ``codec``: NVENC only where a one-frame test encode at ``pix_fmt`` succeeds here
    (no NVIDIA GPU, a data-centre GPU without NVENC such as the A100/H100, or a driver too old all fail it);
    otherwise a warning and the software encoder of the same format."""
    if codec not in SOFTWARE_EQUIVALENT:
        return codec
    problem = _nvenc_problem(codec, _nvenc_pix_fmt(pix_fmt))
    if problem is None:
        return codec
    fallback = SOFTWARE_EQUIVALENT[codec]
    log.warning("%s is not available here (%s); encoding with %s instead", codec, problem, fallback)
    return fallback


def _encode_args(
    codec: str, crf: int, preset: str, pix_fmt: str, suffix: str, extra: Sequence[str], color: dict | None = None
) -> list[str]:
    matrix, space, primaries, transfer = _color_args(color or {})
    if codec.endswith("_nvenc"):
        pix_fmt = _nvenc_pix_fmt(pix_fmt)
    # The tags go on the frames (setparams) as well as the encoder: ffmpeg 7+ encoders take colour properties
    # from the frames, which swscale leaves unspecified except for the matrix and range it wrote.
    args = [
        "-vf", f"scale=out_color_matrix={matrix}:out_range=tv,setparams=range=tv:color_primaries={primaries}"
               f":color_trc={transfer}:colorspace={space}",
        "-c:v", codec, "-pix_fmt", pix_fmt,
        "-colorspace", space, "-color_primaries", primaries, "-color_trc", transfer, "-color_range", "tv",
    ]  # fmt: skip
    if codec in ("libx264", "libx265", "libsvtav1", "libaom-av1", "libvpx-vp9"):
        args += ["-crf", str(crf)]
    elif codec.endswith(("_nvenc", "_qsv", "_amf")):
        args += ["-rc", "vbr", "-cq", str(crf), "-b:v", "0"]
    if codec in ("libx264", "libx265"):
        args += ["-preset", preset]
    elif codec.endswith("_nvenc"):
        args += ["-preset", NVENC_PRESETS.get(preset, preset), "-tune", "hq"]
    if codec == "libx265":
        args += ["-x265-params", "log-level=error"]
    if suffix in (".mp4", ".mov", ".m4v") and codec in ("libx265", "hevc_nvenc"):
        args += ["-tag:v", "hvc1"]
    return [*args, *[str(a) for a in extra]]


# x264/x265 preset names -> NVENC's p1 (fastest) .. p7 (best), so one config key serves both.
NVENC_PRESETS = {
    "ultrafast": "p1", "superfast": "p1", "veryfast": "p2", "faster": "p3", "fast": "p3",
    "medium": "p4", "slow": "p5", "slower": "p6", "veryslow": "p7", "placebo": "p7",
}  # fmt: skip
SOFTWARE_EQUIVALENT = {"h264_nvenc": "libx264", "hevc_nvenc": "libx265", "av1_nvenc": "libsvtav1"}
# swscale's names for YUV matrices, by the colour-space names the probe reports.
_MATRICES = {
    "bt709": "bt709", "bt2020nc": "bt2020", "bt2020c": "bt2020", "smpte170m": "smpte170m",
    "bt470bg": "bt470", "smpte240m": "smpte240m", "fcc": "fcc",
}  # fmt: skip


def _color_args(color: dict) -> tuple[str, str, str, str]:
    """swscale's RGB->YUV matrix and the output's colour space, primaries and transfer tags, from the source's
    colour facts (BT.709 where unknown)."""
    space = color.get("color_space")
    if space not in _MATRICES:
        space = "bt709"
    return _MATRICES[space], space, color.get("color_primaries") or "bt709", color.get("color_transfer") or "bt709"


def _nvenc_pix_fmt(pix_fmt: str) -> str:
    # NVENC takes 10-bit 4:2:0 as p010 (the same samples, semi-planar), not as planar yuv420p10le.
    return {"yuv420p10le": "p010le", "yuv444p10le": "yuv444p16le"}.get(pix_fmt, pix_fmt)


@functools.lru_cache(maxsize=8)
def _nvenc_problem(codec: str, pix_fmt: str) -> str | None:
    """None when ``codec`` encodes a frame at ``pix_fmt`` here, else ffmpeg's reason."""
    proc = run_ffmpeg(
        ["-loglevel", "error", "-f", "lavfi", "-i", "color=c=gray:s=256x256:r=1", "-frames:v", "1",
         "-pix_fmt", pix_fmt, "-c:v", codec, "-f", "null", "-"],
        None, f"test-encoding with {codec}", check=False, timeout=60,
    )  # fmt: skip
    return None if proc.returncode == 0 else last_error_line(proc.stderr)


def _timestamp_filter(pts_s: Sequence[float], time_base: Fraction) -> str:
    """``settb,setpts`` giving frame N the time ``pts_s[N]``, exactly in ``time_base`` ticks.

    Runs of equal frame durations become one linear piece; the pieces are found by a balanced tree of ``if``s on
    the frame number, so each frame costs a handful of comparisons whatever the length (ffmpeg's expressions
    have no arrays).
    """
    ticks = [round(Fraction(t).limit_denominator(10**9) / time_base) for t in pts_s]
    if not ticks:
        raise ValueError("no timestamps")
    pieces: list[tuple[int, int, int]] = []  # first frame, its ticks, ticks per frame within the piece
    n = 0
    while n < len(ticks):
        step = ticks[n + 1] - ticks[n] if n + 1 < len(ticks) else 0
        end = n + 1
        while end < len(ticks) and ticks[end] - ticks[end - 1] == step:
            end += 1
        pieces.append((n, ticks[n], step))
        n = end

    def tree(lo: int, hi: int) -> str:
        if hi - lo == 1:
            first, start, step = pieces[lo]
            return f"{start}+{step}*(N-{first})" if step else str(start)
        mid = (lo + hi) // 2
        return f"if(lt(N\\,{pieces[mid][0]})\\,{tree(lo, mid)}\\,{tree(mid, hi)})"

    return f"settb={time_base.numerator}/{time_base.denominator},setpts='{tree(0, len(pieces))}'"


def _restamp_bsf(probe: dict) -> str:
    """A ``setts`` bitstream filter (an ``-bsf:v`` value) giving every video packet the exact time of the source
    frame it shows, counted from the source's container start like the source's audio.

    Why: the per-segment renders are Matroska, the one container whose ``StereoMode`` ffmpeg turns into the MP4
    st3d box (an MP4/MOV intermediate reads back as "unspecified" packing and the box is lost), and Matroska
    stores whole milliseconds: 24000/1001, 30000/1001 or 240 fps frames arrive up to 1 ms off (rounded once in
    the segment, once in its concat offset). Restamping while the packets are copied into the result brings
    them back exactly, without decoding: a packet's time since the first packet is snapped to the nearest frame
    of the source's timeline. Exact while that error stays under half a frame interval: up to 500 fps,
    variable frame rate included.

    The timeline is cut into runs of frames of equal duration (one run at a constant frame rate); a balanced
    tree of ``if``s on the time finds the run (a few comparisons a packet, however long the video), and within
    it ``round`` counts whole frame durations. Decode times are snapped the same way: past the first frames they
    are presentation times of earlier frames. The few before the first frame (the B-frame delay) keep their
    distance at the fine time base, so they stay increasing and below every presentation time. Durations become
    the source's, the last frame's included, so the video ends where the source's did. The time base is the
    source's, refined as the MP4 muxer would (doubled up to 10000 ticks a second): every frame time is a whole
    tick there, and a millisecond is several ticks.
    """
    video, pts_s = probe["video"], probe["frame_pts_s"]
    if not pts_s:
        raise ValueError("no frame timestamps to restamp with")
    tb = Fraction(video["time_base"])
    den = tb.denominator
    while den < 10000:
        den *= 2
    scale = tb.numerator * (den // tb.denominator)  # output ticks per source tick
    ticks = [round(Fraction(t) / tb) * scale for t in pts_s]  # since the first frame (probe floats of exact ticks)
    last = round((Fraction(video["duration_s"]) - Fraction(pts_s[-1])) / tb) * scale
    if last <= 0:
        last = ticks[-1] - ticks[-2] if len(ticks) > 1 else round(den / Fraction(video["fps_fraction"]))
    # The first frame's place after the container start: ffmpeg counts the source's audio from that start (whole
    # microseconds, as the banner shows it), so the video goes there too and the A/V offset is kept.
    first = round(Fraction(video.get("pts_offset_s", 0.0)) / tb) * tb
    offset = round((first - Fraction(round((probe.get("start_s") or 0.0) * 10**6), 10**6)) * den)

    durations = [b - a for a, b in zip(ticks, ticks[1:], strict=False)] + [last]
    runs: list[list[int]] = []  # [first frame, frames, duration of each]
    for n, step in enumerate(durations):
        if runs and step == runs[-1][2]:
            runs[-1][1] += 1
        else:
            runs.append([n, 1, step])

    def tree(lo: int, hi: int, leaf) -> str:
        if hi - lo == 1:
            return leaf(*runs[lo])
        mid = (lo + hi) // 2
        split = ticks[runs[mid][0] - 1] + ticks[runs[mid][0]]  # twice the time half-way between the two runs
        half = f"{split // 2}.5" if split % 2 else str(split // 2)
        return f"if(lt(ld(0),{half}),{tree(lo, mid, leaf)},{tree(mid, hi, leaf)})"

    def frame_time(n: int, count: int, step: int) -> str:
        if count == 1 or step <= 0:  # the run's one frame (or one time): anything landing in it is that frame
            return str(offset + ticks[n])
        return f"{offset + ticks[n]}+{step}*round((ld(0)-{ticks[n]})/{step})"

    # prescale: PTS/DTS arrive in output ticks; ld(0) holds the packet's time since the first packet.
    timeline = tree(0, len(runs), frame_time)
    pts = f"st(0,PTS-STARTPTS);{timeline}"
    dts = f"st(0,DTS-STARTPTS);if(lt(ld(0),0),{offset}+ld(0),{timeline})"
    duration = f"st(0,PTS-STARTPTS);{tree(0, len(runs), lambda n, count, step: str(step))}"
    return f"setts=pts='{pts}':dts='{dts}':duration='{duration}':time_base=1/{den}:prescale=1"


def _video_stream(path: str | Path) -> tuple[str | None, bool]:
    """Codec name of the first video stream of ``path`` and whether it carries stereo 3D side data."""
    proc = run_ffmpeg(["-i", ffmpeg_url(path)], path, "reading the encoded video", check=False)
    codec, stereo, in_video = None, False, False
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        if "Stream #" in line:
            in_video = codec is None and "Video:" in line
            if in_video:
                codec = line.split("Video:", 1)[1].split()[0].rstrip(",")
        elif in_video and "Stereo 3D:" in line:
            stereo = True
    return codec, stereo


def _read_into(stream, view: memoryview) -> int:
    """Fill ``view`` from ``stream``; returns the bytes read (less only at end of stream)."""
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _drain_lines(stream, sink: collections.deque) -> None:
    # ffmpeg blocks when its stderr pipe fills, so someone must always be reading it.
    try:
        for raw in iter(stream.readline, b""):
            sink.append(raw.decode("utf-8", "replace").rstrip())
    except (OSError, ValueError):
        pass
