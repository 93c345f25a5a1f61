"""NVDS sizes: the widths and depths of a model (``NvdsConfig``), the sizes one input resolution implies
(``Tier``), the window length, and the constants the focal attention's architecture fixes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

WINDOW_FRAMES = 4  # the window is [t-3, t-2, t-1, t], target last (spec section 5)

# Fixed by the architecture: they set bias-table and index-buffer shapes (spec section 11).
WINDOW = 7
EXPAND = 3
FOCAL_WINDOW = 5
FOCAL_L_CLIPS = (7, 4, 2)
FOCAL_KERNEL_CLIPS = (7, 5, 3)
MASK_FILL = -100.0  # the official value for keys that read unfold padding
# Cyclic shifts of the expanded neighbour keys, in key order: top-left, top-right, bottom-left, bottom-right.
ROLL_SHIFTS = ((-EXPAND, -EXPAND), (-EXPAND, EXPAND), (EXPAND, -EXPAND), (EXPAND, EXPAND))
# (kernel, stride) of the unfolds, in key order: the pooled target, then clips 0..2 (padding kernel // 2 each).
UNFOLDS = ((FOCAL_WINDOW, 1),) + tuple(zip(FOCAL_KERNEL_CLIPS, FOCAL_L_CLIPS))


@dataclass(frozen=True)
class NvdsConfig:
    """Widths and depths of NVDS; the defaults are the released model (MiT-B5 backbone)."""

    in_chans: int = 4
    mit_dims: tuple[int, ...] = (64, 128, 320, 512)
    mit_depths: tuple[int, ...] = (3, 6, 40, 3)
    mit_heads: tuple[int, ...] = (1, 2, 5, 8)
    mit_sr: tuple[int, ...] = (8, 4, 2, 1)
    mit_mlp_ratio: int = 4
    embed_dim: int = 256  # MLP-fusion width; the focal stage runs at this width
    focal_dim: int = 256
    focal_heads: int = 8
    focal_depth: int = 4
    focal_mlp_ratio: int = 4
    # ffm2 mid, ffm2 out (= edge_conv1 out), ffm1 out (= edge_conv out), ffm0 out (AO in; AO mid = half)
    decoder_channels: tuple[int, ...] = (256, 128, 64, 32)

    @classmethod
    def tiny(cls) -> NvdsConfig:
        """The spec's tested CPU configuration (section 11): 219 state-dict entries, about 316k params."""
        return cls(
            mit_dims=(16, 32, 40, 64),
            mit_depths=(1, 1, 1, 1),
            mit_heads=(1, 2, 5, 8),
            mit_sr=(8, 4, 2, 1),
            embed_dim=32,
            focal_dim=32,
            focal_heads=4,
            focal_depth=2,
            decoder_channels=(32, 16, 8, 4),
        )

    def __post_init__(self):
        for dim, heads in zip(self.mit_dims, self.mit_heads):
            if dim % heads:
                raise ValueError(f"MiT dim {dim} is not divisible by its head count {heads}")
        if self.focal_dim != self.embed_dim:
            raise ValueError("focal_dim must equal embed_dim (the focal stage refines the fused map)")
        if self.focal_dim % self.focal_heads:
            raise ValueError(f"focal dim {self.focal_dim} is not divisible by {self.focal_heads} heads")
        if len(self.decoder_channels) != 4:
            raise ValueError("decoder_channels needs 4 widths")

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Tier:
    """Every size the model derives from one input resolution, computed in Python (no graph shape ops)."""

    height: int
    width: int

    def __post_init__(self):
        if self.height < 32 or self.width < 32 or self.height % 4 or self.width % 4:
            raise ValueError(f"NVDS needs H and W multiples of 4 from 32 up, got {self.width}x{self.height}")

    def stage(self, i: int) -> tuple[int, int]:
        """Map size after MiT stage i (1..4): the stride-4 stem, then stride-2 convs, each rounding up."""
        h, w = _ceil_div(self.height, 4), _ceil_div(self.width, 4)
        for _ in range(i - 1):
            h, w = _ceil_div(h, 2), _ceil_div(w, 2)
        return h, w

    @property
    def half(self) -> tuple[int, int]:
        return _ceil_div(self.height, 2), _ceil_div(self.width, 2)

    @property
    def padded(self) -> tuple[int, int]:
        """The 1/4-scale map padded right/bottom to a multiple of the window."""
        h, w = self.stage(1)
        return _ceil_div(h, WINDOW) * WINDOW, _ceil_div(w, WINDOW) * WINDOW

    @property
    def windows(self) -> tuple[int, int]:
        hp, wp = self.padded
        return hp // WINDOW, wp // WINDOW


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
