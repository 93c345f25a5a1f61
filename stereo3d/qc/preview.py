"""The preview's page of clips for the report: one HTML page per video that plays its clips, each embedded.

Snakemake's report shows an HTML result inside an ``<iframe>`` whose address is the page itself as a ``data:`` URL
(base64), and it offers an MP4 result only as a download. Browsers cap such addresses: Chromium (Chrome, Edge,
Brave, Opera) does not load a ``data:`` URL longer than 2 MiB, and leaves the frame blank; Firefox's cap is 32 MiB.
The clips are base64 inside the page, which is base64 again in the report, so the page's videos get
``DATA_URL_LIMIT`` x (3/4)^2 bytes between them: about 1.1 MB, whatever the film's size. A clip that fits is embedded
as the preview rendered it; a larger one (a 1080p film's clips at its quality setting are several MB) is encoded
again for the page, smaller and at the bit rate its share allows, and the page names the full-quality file.
"""

from __future__ import annotations

import base64
import html
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

from stereo3d.io.atomic import atomic_output
from stereo3d.io.ffmpeg import BITEXACT, ffmpeg_url, run_ffmpeg

log = logging.getLogger(__name__)

# The longest data: URL Chromium loads into a frame is 2 MiB (url::kMaxURLChars); this leaves room for the prefix
# Snakemake writes before the base64 (``data:text/html;charset=utf8;filename=...;base64,``).
DATA_URL_LIMIT = 2 * 1024 * 1024 - 4096
# The widest copy a page plays: the report's frame is rarely wider, and each halving of the pixels doubles the bits
# each one gets. An even width, so that 4:2:0 needs no padding.
PAGE_WIDTH_PX = 1280
# Tries at a lower bit rate (and then width) when an encode comes out above its share: a short clip's first frame
# costs more than the average the rate control aims at.
ATTEMPTS = 6


def page_bytes_limit(limit: int = DATA_URL_LIMIT) -> int:
    """The largest page (bytes) whose base64 ``data:`` URL stays within ``limit`` characters."""
    return limit // 4 * 3


def clips_page(clips: Sequence[str | Path], labels: Sequence[str], title: str, out: str | Path,
               shown_as: Sequence[str] | None = None, limit: int = DATA_URL_LIMIT) -> dict:  # fmt: skip
    """Write ``out``: one page playing ``clips`` (MP4 files a browser plays, H.264) with their ``labels``, whose
    ``data:`` URL fits ``limit`` characters. ``shown_as``: how the page names each full-quality file (its path
    relative to the work folder); defaults to the file names. Returns the sizes: page, and each clip as embedded."""
    clips = [Path(clip) for clip in clips]
    names = list(shown_as) if shown_as is not None else [clip.name for clip in clips]
    empty = _page(title, [(label, "", name, False) for label, name in zip(labels, names, strict=True)])
    share = (page_bytes_limit(limit) - len(empty.encode("utf-8"))) // 4 * 3 // max(1, len(clips))
    embedded = []
    with tempfile.TemporaryDirectory(dir=Path(out).parent, prefix=f".{Path(out).name}.clips-") as work:
        for number, clip in enumerate(clips):
            data, copied = clip.read_bytes(), False
            if len(data) > share:
                data, copied = _fitted(clip, Path(work) / f"{number}.mp4", share), True
            embedded.append((data, copied))
    players = [(label, base64.b64encode(data).decode("ascii"), name, copied)
               for (data, copied), label, name in zip(embedded, labels, names, strict=True)]  # fmt: skip
    page = _page(title, players)
    size = len(page.encode("utf-8"))
    if size > page_bytes_limit(limit):  # the shares above add up to less: a bug, not a video
        raise AssertionError(f"{out}: the page is {size} bytes, above the {page_bytes_limit(limit)} its frame loads")
    with atomic_output(out) as tmp:
        Path(tmp).write_text(page, encoding="utf-8")
    return {"page_bytes": size, "clip_bytes": [len(data) for data, _ in embedded]}


def _fitted(clip: Path, out: Path, share: int) -> bytes:
    """``clip`` encoded again (H.264, 8-bit 4:2:0, at most ``PAGE_WIDTH_PX`` wide) into at most ``share`` bytes."""
    from stereo3d.io.probe import probe_video

    info = probe_video(clip)
    width = min(PAGE_WIDTH_PX, info["video"]["display_width"]) // 2 * 2
    seconds = max(float(info.get("duration_s") or 0.0), 1.0 / float(info["video"]["fps"]))
    rate = share * 8 * 0.85 / seconds  # bits per second: a margin for the container and the first frame
    for _ in range(ATTEMPTS):
        kbps = max(16, int(rate / 1000))
        run_ffmpeg(
            ["-i", ffmpeg_url(clip), "-map", "0:v", "-vf", f"scale={width}:-2:flags=area", "-c:v", "libx264",
             "-preset", "medium", "-pix_fmt", "yuv420p", "-b:v", f"{kbps}k", "-maxrate", f"{kbps}k",
             "-bufsize", f"{kbps}k", "-movflags", "+faststart", *BITEXACT, "-f", "mp4", "-y", ffmpeg_url(out)],
            clip, "preview clip for the report page",
        )  # fmt: skip
        data = out.read_bytes()
        if len(data) <= share:
            log.info("%s: %d bytes, %d px wide at %d kb/s for the report page (%d bytes allowed)", clip.name,
                     len(data), width, kbps, share)  # fmt: skip
            return data
        rate *= 0.8 * share / len(data)
        if kbps <= 64 and width > 320:  # a rate this low leaves too few bits per pixel: fewer pixels instead
            width = max(320, width // 2 // 2 * 2)
            rate *= 2
    raise AssertionError(f"{clip}: no encode of it fits {share} bytes")


def _page(title: str, players: Sequence[tuple[str, str, str, bool]]) -> str:
    """The page: per clip its label, its video (base64 MP4; "" for none) and where the full-quality file is."""
    figures = []
    for label, data, name, copied in players:
        source = f' src="data:video/mp4;base64,{data}"' if data else ""
        note = f" (a smaller copy for this page; full quality: {name})" if copied else f" ({name})"
        figures.append(
            f"<figure><video controls loop muted autoplay playsinline{source}></video>"
            f"<figcaption>{html.escape(label)}{html.escape(note)}</figcaption></figure>"
        )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title><style>'
        "body{{font-family:sans-serif;margin:12px;color:#282828}}figure{{margin:0 0 16px}}"
        "video{{max-width:100%;display:block;background:#000}}figcaption{{font-size:13px;padding:4px 0}}"
        "</style></head><body><h3>{title}</h3>{figures}</body></html>"
    ).format(title=html.escape(title), figures="".join(figures))
