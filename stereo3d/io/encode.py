"""Pipelined encode of RGB frames through an ffmpeg process, and the choice of encoder (hardware checked, else
software).

``VideoEncoder.write`` queues frames that a background thread feeds to ffmpeg, so encoding overlaps the producer.
What the stream is (size, rate, encoder, quality, pixel format, colour) is a ``VideoStream``; how each encoder is
told is its row in ``stereo3d.io.codecs``.
"""

from __future__ import annotations

import collections
import functools
import logging
import queue
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from stereo3d.errors import BadVideo
from stereo3d.io.atomic import atomic_output
from stereo3d.io.codecs import CODECS, CONTAINERS, MP4_LIKE, Codec, get_codec, software_codec
from stereo3d.io.ffmpeg import BITEXACT, ffmpeg_command, ffmpeg_url, last_error_line, run_ffmpeg
from stereo3d.io.pipes import END, drain_lines, patient_put

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VideoStream:
    """The encoded stream: ``width`` x ``height`` frames at ``fps_fraction`` (e.g. "24000/1001"), by ``codec`` (a
    row of ``stereo3d.io.codecs``) at ``crf``/``preset`` in ``pix_fmt``.

    Frames arrive as uint8, or uint16 with ``depth=16`` (for 10-bit and deeper output; ffmpeg gets rgb48le). RGB is
    converted to YUV with the matrix of ``color`` (a probe's ``video`` dict or any dict with ``color_space``,
    ``color_primaries``, ``color_transfer``), limited range, and the output is tagged with the same primaries and
    transfer: the transfer is never converted, so PQ/HLG (HDR) pictures pass through tagged as they came. Unknown
    or absent colour tags mean BT.709, what players assume for HD and larger. The HDR10 static metadata of
    ``color["hdr10"]`` (a probe's, see ``stereo3d.io.hdr``) goes into the bitstream where the codec's row says
    how. Variable-rate timestamps are kept exactly at ``time_base``. ``sar`` ("1:1") tags the frames with that sample
    aspect ratio; None leaves ffmpeg's default for raw input. ``extra_args`` go to the encoder and muxer last
    (stereo signalling).
    """

    width: int
    height: int
    fps_fraction: str
    codec: str = "libx264"
    crf: int = 18
    preset: str = "medium"
    pix_fmt: str = "yuv420p"
    depth: int = 8
    color: Mapping | None = None
    time_base: str = "1/90000"
    sar: str | None = None
    extra_args: tuple[str, ...] = ()


class VideoEncoder:
    """Encode RGB frames ``[height, width, 3]`` of ``stream`` into a video-only ``out_path`` (.mkv, .mp4, .mov
    or .m4v, as the encoder's row allows).

    ``write(frame)`` queues a copy of the frame; a background thread feeds ffmpeg, so encoding overlaps the
    producer. The file appears under its name only on a clean exit; on an exception ffmpeg is killed and
    nothing is left. Timestamps are constant-rate at the stream's rate, or ``pts_s``: one presentation time per
    frame in seconds (variable frame rate), kept exactly at the stream's time base.
    """

    def __init__(
        self,
        out_path: str | Path,
        stream: VideoStream,
        *,
        pts_s: Sequence[float] | None = None,
        prefetch: int = 8,
    ):
        self.out_path = Path(out_path)
        suffix = self.out_path.suffix.lower()
        if suffix not in CONTAINERS:
            raise ValueError(f"{self.out_path}: output must end in one of {', '.join(CONTAINERS)}")
        codec = get_codec(stream.codec)
        if suffix not in codec.containers:
            raise ValueError(f"{self.out_path}: {codec.name} cannot go into {suffix} "
                             f"(it goes into {', '.join(sorted(codec.containers))})")  # fmt: skip
        if stream.width <= 0 or stream.height <= 0:
            raise ValueError(f"frame size must be positive, not {stream.width}x{stream.height}")
        if stream.depth not in (8, 16):
            raise ValueError(f"input depth must be 8 or 16 bits, not {stream.depth}")
        self.width, self.height = stream.width, stream.height
        self.fps = Fraction(stream.fps_fraction)
        self.dtype = np.dtype(np.uint8 if stream.depth == 8 else np.uint16)
        self.frames_written = 0
        self._prefetch = max(1, prefetch)
        self._buffers: list[np.ndarray] = []  # frame_buffer's arrays, handed out in turn
        self._input_pix_fmt = "rgb24" if stream.depth == 8 else "rgb48le"
        self._pts_s = None if pts_s is None else [float(t) for t in pts_s]
        self._time_base = Fraction(stream.time_base)
        self._encode = encode_args(stream, suffix)
        self._queue: queue.Queue = queue.Queue(maxsize=self._prefetch)
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
            "-map", "0:v", *encode, *BITEXACT,
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
            threading.Thread(target=drain_lines, args=(self._proc.stderr, self._stderr), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def frame_buffer(self) -> np.ndarray:
        """An array for the next frame (``[height, width, 3]`` of the stream's dtype) to fill and hand to ``write(...,
        owned=True)`` before asking for another: one of ``prefetch + 2`` arrays kept for the purpose, in turn. When
        ``write`` returns, at most ``prefetch`` frames wait in the queue and the feeder is writing at most one more,
        so the array handed out ``prefetch + 2`` frames before has reached ffmpeg. A fresh array per frame would
        cost its page faults instead (at 1080p full SBS, 12 MB: 1-3 ms a frame)."""
        slot = self.frames_written % (self._prefetch + 2)
        if slot == len(self._buffers):
            self._buffers.append(np.empty((self.height, self.width, 3), self.dtype))
        return self._buffers[slot]

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
        patient_put(self._queue, item, self._running)
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
                if item is END or self._stop.is_set():
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

    def _running(self) -> bool:
        self._raise_if_failed()
        return True

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
        patient_put(self._queue, END, self._running)
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
                    self._queue.put_nowait(END)
                    break
                except queue.Full:
                    try:
                        self._queue.get_nowait()
                    except queue.Empty:
                        pass
            self._proc.wait()
        for thread in self._threads:
            thread.join(timeout=10)


def automatic_codec(software: str, pix_fmt: str) -> str:
    """``encode.codec: auto``: the NVIDIA encoder of ``software``'s family where a one-frame test encode succeeds
    here (a GPU with NVENC, and an ffmpeg that has it), else ``software`` itself, on the CPU. Said in one line
    either way; no warning, since nothing asked for is missing."""
    family = get_codec(software).family
    nvenc = next((codec for codec in CODECS.values() if codec.family == family and codec.hardware == "NVENC"), None)
    if nvenc is None or pix_fmt not in nvenc.pix_fmts:
        return software
    problem = hardware_problem(nvenc.encoder, nvenc.pix_fmts[pix_fmt])
    if problem is None:
        log.info("encode.codec auto: %s (the GPU's encoder)", nvenc.name)
        return nvenc.name
    log.info("encode.codec auto: %s (no NVENC here: %s)", software, problem)
    return software


def resolve_codec(codec: str, pix_fmt: str) -> str:
    """The encoder to use for ``codec`` at ``pix_fmt``: a hardware encoder only where a one-frame test encode
    succeeds here; otherwise a one-line warning with ffmpeg's reason and the software encoder of the same family.
    Software encoders are taken as they are."""
    chosen = get_codec(codec)
    if chosen.hardware is None:
        return codec
    problem = hardware_problem(chosen.encoder, chosen.pix_fmts[pix_fmt])
    if problem is None:
        return codec
    fallback = software_codec(chosen.family).name
    log.warning("%s is not available here (%s); encoding with %s instead", codec, problem, fallback)
    return fallback


def encode_args(stream: VideoStream, suffix: str) -> list[str]:
    """ffmpeg's filter, encoder and tag options for ``stream`` in a file ending in ``suffix``."""
    codec = get_codec(stream.codec)
    pix_fmt = _encoder_pix_fmt(codec, stream.pix_fmt)
    matrix, space, primaries, transfer = _color_args(stream.color or {})
    # The tags go on the frames (setparams) as well as the encoder: ffmpeg 7+ encoders take colour properties
    # from the frames, which swscale leaves unspecified except for the matrix and range it wrote.
    vf = (
        f"scale=out_color_matrix={matrix}:out_range=tv,setparams=range=tv:color_primaries={primaries}"
        f":color_trc={transfer}:colorspace={space}"
    )
    if stream.sar is not None:
        # An explicit tag, so that the output of a non-square source says its pixels are now square.
        vf += f",setsar={stream.sar.replace(':', '/')}"
    args = [
        "-vf", vf,
        "-c:v", codec.encoder, "-pix_fmt", pix_fmt,
        "-colorspace", space, "-color_primaries", primaries, "-color_trc", transfer, "-color_range", "tv",
        *codec.quality(stream.crf, stream.preset),
    ]  # fmt: skip
    hdr10 = (stream.color or {}).get("hdr10")
    if hdr10 and codec.hdr10 is not None:
        args += codec.hdr10(hdr10)
    if suffix in MP4_LIKE and codec.mp4_tag:
        args += ["-tag:v", codec.mp4_tag]
    return joined_private_params([*args, *[str(a) for a in stream.extra_args]])


def joined_private_params(args: list[str]) -> list[str]:
    """``args`` with each encoder's private options (``-x264-params``, ``-x265-params``, ``-svtav1-params``) given
    once, their ``key=value`` lists joined in order where several parts ask for some: ffmpeg keeps only the last
    of an option given twice, which would drop the quality row's or the HDR10 metadata's silently."""
    joined: list[str] = []
    where: dict[str, int] = {}
    pairs = iter(args)
    for arg in pairs:
        if not (arg.startswith("-") and arg.endswith("-params")):
            joined.append(arg)
            continue
        value = next(pairs)
        if arg in where:
            joined[where[arg]] += f":{value}"
        else:
            where[arg] = len(joined) + 1
            joined += [arg, value]
    return joined


def _encoder_pix_fmt(codec: Codec, pix_fmt: str) -> str:
    try:
        return codec.pix_fmts[pix_fmt]
    except KeyError:
        raise ValueError(f"{codec.name} cannot encode {pix_fmt} (it takes {', '.join(codec.pix_fmts)})") from None


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


@functools.lru_cache(maxsize=16)
def hardware_problem(encoder: str, pix_fmt: str) -> str | None:
    """None when ffmpeg's ``encoder`` encodes a frame at ``pix_fmt`` here, else the reason in one line: the
    encoder's own first complaint ("Cannot load libcuda.so.1", "Error creating a MFX session: -9."), else ffmpeg's
    ("Unknown encoder 'h264_videotoolbox'").

    256x256: above every hardware encoder's smallest frame (NVENC's is 145x49)."""
    proc = run_ffmpeg(
        ["-loglevel", "error", "-f", "lavfi", "-i", "color=c=gray:s=256x256:r=1", "-frames:v", "1",
         "-pix_fmt", pix_fmt, "-c:v", encoder, "-f", "null", "-"],
        None, f"test-encoding with {encoder}", check=False, timeout=60,
    )  # fmt: skip
    if proc.returncode == 0:
        return None
    own = f"[{encoder} @ "
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        if line.startswith(own):
            return last_error_line(line)
    return last_error_line(proc.stderr)


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
