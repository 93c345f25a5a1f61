"""The video encoders the render may use: one ``Codec`` row each in ``CODECS``, and the containers they go in.

A row says everything that differs between encoders: the ffmpeg encoder, its family (the bitstream format, named
as ffmpeg's decoders name it: h264, hevc, av1), how the config's ``crf`` and ``preset`` become the encoder's own
quality options, which of the config's pixel formats it takes (and under which name it takes them), the containers
its stream may go in, whether it is hardware, and how it is told a source's HDR10 static metadata. The encoder
(``stereo3d.io.encode``), the final mux (``stereo3d.io.mux``), the stereo signalling (``stereo3d.stereo.layouts``)
read these rows; the schema's
``encode.codec``/``deep_codec``/``pix_fmt`` enums and ``config.yaml`` list them, tied by tests/test_registries.py.

Hardware encoders (NVENC, Quick Sync, AMF, VideoToolbox) exist on some machines only: each is used only where a
one-frame test encode succeeds here, otherwise a one-line warning and the software encoder of the same family
(``stereo3d.io.encode.resolve_codec``). A machine without the device, a data-centre GPU without NVENC (A100,
H100, H200), a driver too old or an ffmpeg built without the API (VideoToolbox outside macOS) all fail it alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from stereo3d.io.hdr import svtav1_hdr10, x265_hdr10
from stereo3d.io.probe import bit_depth

# Output suffix -> ffmpeg muxer.
CONTAINERS = {".mkv": "matroska", ".mp4": "mp4", ".mov": "mov", ".m4v": "mp4"}
MP4_LIKE = frozenset({".mp4", ".mov", ".m4v"})
ANY_CONTAINER = frozenset(CONTAINERS)
# ffmpeg's mov muxer refuses AV1 ("av1 only supported in MP4 and AVIF").
NOT_MOV = ANY_CONTAINER - {".mov"}
# The encoders' speed presets take x264's names in the config (encode.preset, the schema's enum), so that one key
# serves every encoder; each hardware family maps them onto its own scale.
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")


@dataclass(frozen=True)
class Codec:
    name: str  # the config's name (encode.codec, encode.deep_codec)
    encoder: str  # ffmpeg's encoder
    family: str  # the bitstream format, as ffmpeg's decoder and probe name it: h264 | hevc | av1
    quality: Callable[[int, str], list[str]]  # (crf, preset) -> the encoder's rate-control and speed options
    # The config's pixel formats this encoder takes -> the name it takes each under (NVENC wants 10-bit 4:2:0 as
    # semi-planar p010le: the same samples). Their bit depths are the depths it writes.
    pix_fmts: Mapping[str, str]
    containers: frozenset[str]  # output suffixes its stream may go in
    hardware: str | None = None  # the device API (NVENC, QSV, AMF, VideoToolbox), probed by a test encode
    mp4_tag: str | None = None  # the sample entry MP4/MOV players need (hvc1: Apple and VR players' HEVC)
    # Options writing the H.264 frame-packing SEI for an arrangement type (x264 --frame-packing), None: none.
    frame_packing: Callable[[int], list[str]] | None = None
    # Options writing HDR10 static metadata (a probe's ``hdr10``, see stereo3d.io.hdr) into the bitstream; None: the
    # encoder cannot be told (x264 writes no such SEI; ffmpeg's hardware encoders take it, if at all, only from
    # frame side data, which raw frames from a pipe do not carry).
    hdr10: Callable[[dict], list[str]] | None = None

    @property
    def depths(self) -> frozenset[int]:
        """The bit depths it writes."""
        return frozenset(bit_depth(fmt) for fmt in self.pix_fmts)


def _x26x(crf: int, preset: str) -> list[str]:
    return ["-crf", str(crf), "-preset", preset]


def _x265(crf: int, preset: str) -> list[str]:
    return [*_x26x(crf, preset), "-x265-params", "log-level=error"]


# SVT-AV1 presets run 0 (slowest) .. 13; 8 .. 10 are its real-time-ish range, 4 .. 6 its archival one.
SVT_PRESETS = {
    "ultrafast": 12, "superfast": 11, "veryfast": 10, "faster": 9, "fast": 8,
    "medium": 7, "slow": 5, "slower": 4, "veryslow": 2,
}  # fmt: skip


def _svtav1(crf: int, preset: str) -> list[str]:
    # The same CRF number means somewhat less quality on AV1's 0..63 scale than on x264's 0..51: kept as given, so
    # that the config's one number behaves monotonically across encoders.
    return ["-crf", str(crf), "-preset", str(SVT_PRESETS[preset])]


# NVENC's p1 (fastest) .. p7 (best).
NVENC_PRESETS = {
    "ultrafast": "p1", "superfast": "p1", "veryfast": "p2", "faster": "p3", "fast": "p3",
    "medium": "p4", "slow": "p5", "slower": "p6", "veryslow": "p7",
}  # fmt: skip


def _nvenc(crf: int, preset: str) -> list[str]:
    # Constant quality: VBR with a target quality and no bitrate cap.
    return ["-rc", "vbr", "-cq", str(crf), "-b:v", "0", "-preset", NVENC_PRESETS[preset], "-tune", "hq"]


# Quick Sync's own presets are x264's names from veryfast to veryslow.
QSV_PRESETS = {name: ("veryfast" if name in ("ultrafast", "superfast") else name) for name in PRESETS}


def _qsv(crf: int, preset: str) -> list[str]:
    # global_quality without a bitrate is ICQ (intelligent constant quality), 1 .. 51.
    return ["-global_quality", str(max(1, crf)), "-preset", QSV_PRESETS[preset]]


AMF_QUALITY = {
    "ultrafast": "speed", "superfast": "speed", "veryfast": "speed", "faster": "speed",
    "fast": "balanced", "medium": "balanced", "slow": "quality", "slower": "quality", "veryslow": "quality",
}  # fmt: skip


def _amf(crf: int, preset: str) -> list[str]:
    # Quality-defined VBR: the one AMF mode whose level (0 .. 51) reads like a CRF on every family.
    return ["-rc", "qvbr", "-qvbr_quality_level", str(crf), "-quality", AMF_QUALITY[preset]]


def _vt(crf: int, preset: str) -> list[str]:
    # VideoToolbox has no CRF: its constant quality (-q:v, 1 .. 100, Apple silicon) runs the other way. 100 - 2 x
    # CRF puts CRF 18 at 64, 0 (lossless) at 100. It has no speed presets.
    return ["-q:v", str(max(1, 100 - 2 * crf))]


def _x264_frame_packing(arrangement: int) -> list[str]:
    return ["-x264-params", f"frame-packing={arrangement}"]


SAME = {"yuv420p": "yuv420p", "yuv444p": "yuv444p", "yuv420p10le": "yuv420p10le", "yuv444p10le": "yuv444p10le"}
SAME_420 = {"yuv420p": "yuv420p", "yuv420p10le": "yuv420p10le"}
NVENC_FORMATS = {"yuv420p": "yuv420p", "yuv444p": "yuv444p", "yuv420p10le": "p010le", "yuv444p10le": "yuv444p16le"}
NVENC_420 = {"yuv420p": "yuv420p", "yuv420p10le": "p010le"}
NV12 = {"yuv420p": "nv12"}
NV12_P010 = {"yuv420p": "nv12", "yuv420p10le": "p010le"}

# fmt: off
CODECS: dict[str, Codec] = {
    codec.name: codec
    for codec in (
        # Software, in every ffmpeg this package ships with: each family's fallback.
        Codec("libx264",   "libx264",   "h264", _x26x,   SAME,     ANY_CONTAINER, frame_packing=_x264_frame_packing),
        Codec("libx265",   "libx265",   "hevc", _x265,   SAME,     ANY_CONTAINER, mp4_tag="hvc1", hdr10=x265_hdr10),
        Codec("libsvtav1", "libsvtav1", "av1",  _svtav1, SAME_420, NOT_MOV, hdr10=svtav1_hdr10),
        # Hardware: NVIDIA, Intel Quick Sync, AMD, Apple (macOS builds of ffmpeg only; Apple has no AV1 encoder).
        Codec("h264_nvenc", "h264_nvenc", "h264", _nvenc, NVENC_FORMATS, ANY_CONTAINER, "NVENC"),
        Codec("hevc_nvenc", "hevc_nvenc", "hevc", _nvenc, NVENC_FORMATS, ANY_CONTAINER, "NVENC", "hvc1"),
        Codec("av1_nvenc",  "av1_nvenc",  "av1",  _nvenc, NVENC_420,     NOT_MOV,       "NVENC"),
        Codec("h264_qsv",   "h264_qsv",   "h264", _qsv,   NV12,          ANY_CONTAINER, "QSV"),
        Codec("hevc_qsv",   "hevc_qsv",   "hevc", _qsv,   NV12_P010,     ANY_CONTAINER, "QSV", "hvc1"),
        Codec("av1_qsv",    "av1_qsv",    "av1",  _qsv,   NV12_P010,     NOT_MOV,       "QSV"),
        Codec("h264_amf",   "h264_amf",   "h264", _amf,   NV12,          ANY_CONTAINER, "AMF"),
        Codec("hevc_amf",   "hevc_amf",   "hevc", _amf,   NV12_P010,     ANY_CONTAINER, "AMF", "hvc1"),
        Codec("av1_amf",    "av1_amf",    "av1",  _amf,   NV12_P010,     NOT_MOV,       "AMF"),
        Codec("h264_videotoolbox", "h264_videotoolbox", "h264", _vt, NV12,      ANY_CONTAINER, "VideoToolbox"),
        Codec("hevc_videotoolbox", "hevc_videotoolbox", "hevc", _vt, NV12_P010, ANY_CONTAINER, "VideoToolbox", "hvc1"),
    )
}
# fmt: on
# The config's pixel formats: those some encoder takes (encode.pix_fmt also offers auto).
PIX_FMTS = tuple(dict.fromkeys(fmt for codec in CODECS.values() for fmt in codec.pix_fmts))


def get_codec(name: str) -> Codec:
    try:
        return CODECS[name]
    except KeyError:
        raise ValueError(f"unknown encoder {name!r} (valid: {', '.join(CODECS)})") from None


def software_codec(family: str) -> Codec:
    """The software encoder of ``family``: what a hardware encoder that does not work here gives way to."""
    return next(codec for codec in CODECS.values() if codec.family == family and codec.hardware is None)


def family_mp4_tag(family: str) -> str | None:
    """The MP4/MOV sample entry a stream of ``family`` needs, None for ffmpeg's default."""
    return next((codec.mp4_tag for codec in CODECS.values() if codec.family == family and codec.mp4_tag), None)
