"""HDR10 static metadata: read from a source's decoded picture, written back as an encoder's own options.

HDR10 is a PQ picture plus two facts a display tone-maps by: the mastering display (SMPTE ST 2086: its primaries,
white point and luminance range) and the content light level (CTA-861.3: MaxCLL, the brightest pixel, and MaxFALL,
the brightest frame average, in cd/m²). FFmpeg's decoder hands both over as side data of every decoded frame,
whether the file keeps them in the bitstream (HEVC SEI, AV1 metadata OBU) or in the container (Matroska colour
elements, MP4 ``mdcv``/``clli`` boxes, attached to the frames from the stream's coded side data): reading the
first decoded picture therefore covers every place a file may keep them, where the stream's side data would
miss the bitstream.

The metadata is kept in x265's integer units (chromaticity in 1/50000, luminance in 1/10000 cd/m², the units of
the HEVC SEI itself), so that the x265 encoder gets back exactly what an HEVC source said. The frames reach the
encoder as raw RGB through a pipe, with no side data; each encoder that can write the metadata gets it as
options (its row in ``stereo3d.io.codecs``).
"""

from __future__ import annotations

import struct
from fractions import Fraction

from av.sidedata.sidedata import Type

# AVMasteringDisplayMetadata (libavutil/mastering_display_metadata.h): display_primaries[3][2] (R, G, B; x, y),
# white_point[2], min_luminance, max_luminance, all AVRational (two int32), then has_primaries, has_luminance.
_MASTERING = struct.Struct("=22i")
# AVContentLightMetadata: MaxCLL, MaxFALL (unsigned).
_LIGHT = struct.Struct("=2I")
CHROMATICITY_UNITS = 50000  # per 1.0 of CIE 1931 x or y
LUMINANCE_UNITS = 10000  # per cd/m²


def read_hdr10(frame) -> dict | None:
    """The HDR10 static metadata of a decoded ``frame`` (PyAV), None where it carries none.

    ``{"mastering_display": {"red": [x, y], "green": [x, y], "blue": [x, y], "white_point": [x, y],
    "max_luminance": L, "min_luminance": L} or None, "content_light": [max_cll, max_fall] or None}``: chromaticity
    in 1/50000, luminance in 1/10000 cd/m², light levels in cd/m². A mastering display without both its primaries
    and its luminance range is left out (x265 and SVT-AV1 take the whole set or nothing), as is a light level of
    0, 0 (the standards' "unknown").
    """
    mastering = _mastering_display(frame.side_data.get(Type.MASTERING_DISPLAY_METADATA))
    light = _content_light(frame.side_data.get(Type.CONTENT_LIGHT_LEVEL))
    if mastering is None and light is None:
        return None
    return {"mastering_display": mastering, "content_light": light}


def x265_hdr10(hdr10: dict) -> list[str]:
    """x265's options for ``hdr10`` (``master-display``, ``max-cll``: written as SEI on every key frame), in x265's
    own units, those the metadata is kept in."""
    return _encoder_params("-x265-params", "master-display", "max-cll", hdr10, str, str)


def svtav1_hdr10(hdr10: dict) -> list[str]:
    """SVT-AV1's options for ``hdr10`` (``mastering-display``, ``content-light``: written as metadata OBUs). SVT-AV1
    takes the same notation as x265 in plain numbers (0.68, 1000 cd/m²); AV1 itself stores them coarser
    (chromaticity in 1/65536, minimum luminance in 1/16384 cd/m²)."""
    return _encoder_params("-svtav1-params", "mastering-display", "content-light", hdr10, _chromaticity, _luminance)


def _encoder_params(option: str, display_name: str, light_name: str, hdr10: dict, chromaticity, luminance) -> list[str]:
    """``option`` with the ``key=value`` list of the mastering display (``G(x,y)B(x,y)R(x,y)WP(x,y)L(max,min)``,
    numbers written by ``chromaticity`` and ``luminance``) and the content light level, of those ``hdr10`` has."""
    params = []
    display = hdr10.get("mastering_display")
    if display:
        primaries = "".join(f"{tag}({chromaticity(x)},{chromaticity(y)})" for tag, (x, y) in _primaries(display))
        params.append(f"{display_name}={primaries}"
                      f"L({luminance(display['max_luminance'])},{luminance(display['min_luminance'])})")  # fmt: skip
    light = hdr10.get("content_light")
    if light:
        params.append(f"{light_name}={light[0]},{light[1]}")
    return [option, ":".join(params)] if params else []


def _mastering_display(side_data) -> dict | None:
    if side_data is None or side_data.buffer_size < _MASTERING.size:
        return None
    values = _MASTERING.unpack_from(bytes(side_data))
    *rationals, has_primaries, has_luminance = values
    if not (has_primaries and has_luminance):
        return None
    r_x, r_y, g_x, g_y, b_x, b_y, w_x, w_y, min_lum, max_lum = (
        _ratio(rationals[i], rationals[i + 1]) for i in range(0, 20, 2)
    )

    def chroma(x: Fraction, y: Fraction) -> list[int]:
        return [round(x * CHROMATICITY_UNITS), round(y * CHROMATICITY_UNITS)]

    return {
        "red": chroma(r_x, r_y),
        "green": chroma(g_x, g_y),
        "blue": chroma(b_x, b_y),
        "white_point": chroma(w_x, w_y),
        "max_luminance": round(max_lum * LUMINANCE_UNITS),
        "min_luminance": round(min_lum * LUMINANCE_UNITS),
    }


def _content_light(side_data) -> list[int] | None:
    if side_data is None or side_data.buffer_size < _LIGHT.size:
        return None
    max_cll, max_fall = _LIGHT.unpack_from(bytes(side_data))
    return [max_cll, max_fall] if max_cll or max_fall else None


def _ratio(numerator: int, denominator: int) -> Fraction:
    return Fraction(numerator, denominator) if denominator else Fraction(0)


def _primaries(display: dict) -> list[tuple[str, list[int]]]:
    # The order of the HEVC SEI and of x265's option: green, blue, red, then the white point.
    return [("G", display["green"]), ("B", display["blue"]), ("R", display["red"]), ("WP", display["white_point"])]


def _chromaticity(units: int) -> str:
    return f"{units / CHROMATICITY_UNITS:.5f}"


def _luminance(units: int) -> str:
    return f"{units / LUMINANCE_UNITS:.4f}"
