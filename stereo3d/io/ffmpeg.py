"""The one place that finds and runs the ffmpeg binary.

The binary encodes (a pipe of RGB frames), muxes the result with every stream of the source, and makes the
sample clips; everything that reads a video (probe, decode) goes through PyAV instead, which binds FFmpeg's
libraries and returns data, never text printed for people. Everything that runs the binary goes through here so
that its choice, the argument conventions and the error wording are the same everywhere. File names only ever travel
inside argument lists, never through a shell.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from stereo3d.errors import BadVideo

# Options every invocation gets: no banner noise, never read the terminal (a pipeline may run in the
# background, and ffmpeg reading stdin would steal a rawvideo pipe), no progress lines in logs.
COMMON_ARGS = ("-hide_banner", "-nostdin", "-nostats")
# Output options of every file the package writes: no random Matroska segment id, no muxing date, no library
# version, so the same inputs give the same bytes (a resumed job equals an uninterrupted one).
BITEXACT = ("-fflags", "+bitexact")

# Lines ffmpeg prints after the real cause; they say only that something failed.
_GENERIC = re.compile(
    r"^(conversion failed!?|exiting with exit code.*|error opening (input|output) files?.*"
    r"|error while (filtering|decoding|encoding).*|terminating thread.*|task finished with error code.*"
    r"|error selecting an encoder|nothing was written.*)$",
    re.IGNORECASE,
)
_CONTEXT_PREFIX = re.compile(r"^(\[[^\]]*@ 0x[0-9a-f]+\]\s*)+", re.IGNORECASE)
_PROGRESS = re.compile(r"^(frame=|size=|video:|\s*\[?[a-z0-9_]+ @ 0x[0-9a-f]+\]?\s*$)", re.IGNORECASE)
_ERRORISH = re.compile(r"error|invalid|fail|unable|cannot|could not|not supported|no such|unknown", re.IGNORECASE)


def ffmpeg_exe() -> str:
    """The ffmpeg binary: ``$STEREO3D_FFMPEG`` when set (a system or NVENC build), else imageio-ffmpeg's."""
    override = os.environ.get("STEREO3D_FFMPEG")
    if override:
        return override
    return _bundled_ffmpeg()


def run_ffmpeg(
    args: list[str],
    path_for_errors: str | Path | None,
    what: str,
    *,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run ffmpeg with ``args`` (after the common options) and capture stdout and stderr as bytes.

    On a non-zero exit (when ``check``) raise ``BadVideo(path_for_errors, "<what>: <ffmpeg's cause>")``.
    """
    cmd = ffmpeg_command(args)
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise BadVideo(path_for_errors, f"{what}: ffmpeg binary not found ({cmd[0]})") from exc
    except subprocess.TimeoutExpired as exc:
        raise BadVideo(path_for_errors, f"{what}: ffmpeg did not finish within {timeout} s") from exc
    if check and proc.returncode != 0:
        raise BadVideo(path_for_errors, f"{what}: {last_error_line(proc.stderr)}")
    return proc


def ffmpeg_command(args: list[str]) -> list[str]:
    """The full argument list for ``args``: binary first, then the common options."""
    return [ffmpeg_exe(), *COMMON_ARGS, *[os.fspath(a) for a in args]]


def ffmpeg_url(path: str | Path) -> str:
    """A file name as ffmpeg must see it to take it literally.

    The ``file:`` protocol keeps names such as ``-x.mp4`` from reading as options and ``a:b.mp4`` from reading
    as a protocol; an absolute path keeps the result independent of ffmpeg's working directory.
    """
    return "file:" + os.fspath(Path(path).absolute())


def last_error_line(stderr: bytes | str) -> str:
    """The most telling line of ffmpeg's stderr: the last one that names a cause, without log prefixes."""
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    lines = []
    for raw in text.replace("\r", "\n").splitlines():
        line = _CONTEXT_PREFIX.sub("", raw.strip()).strip()
        if line and not _PROGRESS.match(line):
            lines.append(line)
    specific = [ln for ln in lines if not _GENERIC.match(ln)]
    for pool in (
        [ln for ln in specific if _ERRORISH.search(ln)],
        specific,
        lines,
    ):
        if pool:
            line = pool[-1]
            return line if len(line) <= 300 else line[:297] + "..."
    return "ffmpeg failed without a message"


def bsf_options(name: str, path_for_errors: str | Path | None = None) -> frozenset[str]:
    """The option names of bitstream filter ``name`` in the ffmpeg binary in use (empty: it has no such filter),
    asked once per binary. A binary that does not run is ``run_ffmpeg``'s error, naming ``path_for_errors``.

    Builds differ (the bundled FFmpeg 9's ``setts`` has ``prescale``, FFmpeg 7.0's has not), and a system or NVENC
    build named by ``$STEREO3D_FFMPEG`` may be older than the bundled one."""
    key = (ffmpeg_exe(), name)
    if key not in _BSF_OPTIONS:
        proc = run_ffmpeg(["-h", f"bsf={name}"], path_for_errors, f"asking ffmpeg for {name}'s options", check=False)
        _BSF_OPTIONS[key] = frozenset(re.findall(r"^\s+-(\w+)\s", proc.stdout.decode("utf-8", "replace"), re.M))
    return _BSF_OPTIONS[key]


_BSF_OPTIONS: dict[tuple[str, str], frozenset[str]] = {}


def _bundled_ffmpeg() -> str:
    # Imported lazily so that a configured system ffmpeg works without imageio-ffmpeg installed.
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()
