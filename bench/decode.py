"""P10: decoding through PyAV (the package's FrameReader) against an ffmpeg pipe, on the same frames.

    python -m bench.decode [--frames N] [--repeats R]

Both deliver the same thing a stage consumes: every frame of a clip as RGB arrays, at the source size or scaled
(area averaging) to the DA3 input size of a 16:9 frame, 8-bit (rgb24) and 10-bit (rgb48le). The pipe is the
reader the package used before PyAV, reduced to its decode: one ``ffmpeg`` process writing raw frames to a pipe
that a thread reads into arrays. The figure is the worst of the four ratios (PyAV fps ÷ pipe fps); the goal is
that PyAV is at least as fast everywhere, since it replaced the pipe. Contenders take turns, best round counts.
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import threading
import time

import numpy as np

from bench import common

HEVC10 = dict(codec="libx265", pix_fmt="yuv420p10le", extra=("-x265-params", "log-level=error"))
HD = dict(width=1920, height=1080, pattern="testsrc2")
CASES = {  # name: clip spec, output size (None: the source's), deep
    "1080p 8-bit": (HD, None, False),
    "1080p 10-bit": ({**HD, **HEVC10}, None, True),
    "518x292 8-bit": (HD, (518, 292), False),
    "518x292 10-bit": ({**HD, **HEVC10}, (518, 292), True),
}


def pipe_frames(path, probe: dict, size, deep: bool) -> int:
    """The pipe baseline: ffmpeg decodes (and scales) in its own process; a thread reads whole frames."""
    from stereo3d.io.ffmpeg import ffmpeg_command, ffmpeg_url

    video = probe["video"]
    width, height = size or (video["display_width"], video["display_height"])
    pix_fmt, dtype = ("rgb48le", np.uint16) if deep else ("rgb24", np.uint8)
    filters = ([f"scale={width}:{height}:flags=area"] if size else []) + [f"format={pix_fmt}"]
    args = ["-loglevel", "error", "-i", ffmpeg_url(path), "-map", f"0:{video['index']}", "-fps_mode", "passthrough",
            "-vf", ",".join(filters), "-f", "rawvideo", "-pix_fmt", pix_fmt, "pipe:1"]  # fmt: skip
    proc = subprocess.Popen(ffmpeg_command(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    frames: queue.Queue = queue.Queue(maxsize=8)
    nbytes = width * height * 3 * np.dtype(dtype).itemsize

    def pump():
        while True:
            frame = np.empty((height, width, 3), dtype)
            view, got = memoryview(frame).cast("B"), 0
            while got < nbytes:
                n = proc.stdout.readinto(view[got:])
                if not n:
                    break
                got += n
            if got < nbytes:
                break
            frames.put(frame)
        frames.put(None)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    count = 0
    while frames.get() is not None:
        count += 1
    thread.join()
    proc.wait()
    return count


def pyav_frames(path, probe: dict, size, deep: bool) -> int:
    from stereo3d.io.decode import FrameReader

    with FrameReader(path, probe, size=size, deep=deep) as reader:
        return sum(1 for _ in reader)


def run(frames: int = 96, repeats: int = 2) -> dict:
    results = {}
    for name, (spec, size, deep) in CASES.items():
        clip = common.clip(f"decode_{spec.get('codec', 'x264')}_{frames}", frames=frames, fps="24", **spec)
        probe = common.probe(clip)

        def timed(reader, clip=clip, probe=probe, size=size, deep=deep):
            def go() -> float:
                start = time.perf_counter()
                assert reader(clip, probe, size, deep) == frames
                return time.perf_counter() - start

            return go

        times = common.interleaved({"pipe": timed(pipe_frames), "pyav": timed(pyav_frames)}, repeats)
        pipe_fps, pyav_fps = frames / min(times["pipe"]), frames / min(times["pyav"])
        results[name] = {"pipe_fps": round(pipe_fps, 1), "pyav_fps": round(pyav_fps, 1),
                         "ratio": round(pyav_fps / pipe_fps, 3)}  # fmt: skip
    return results


def figure(frames: int = 96, repeats: int = 2) -> dict:
    common.say("P10: decoding through PyAV against an ffmpeg pipe (1080p and DA3 size, 8 and 10 bit)")
    cases = run(frames, repeats)
    worst = min(cases, key=lambda name: cases[name]["ratio"])
    return {
        "P10": common.figure(
            cases[worst]["ratio"],
            ">= 1.0",
            {"what": f"ffmpeg pipe, {worst}", "fps": cases[worst]["pipe_fps"]},
            {"what": f"PyAV FrameReader, {worst}", "fps": cases[worst]["pyav_fps"]},
            cases=cases,
            setup=f"{frames} frames of a 1920x1080 testsrc2 clip per case (H.264 8-bit, HEVC 10-bit), best of "
            f"{repeats} interleaved rounds",
        )
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(run(args.frames, args.repeats), indent=2))
