"""The DA3 variants (rows of ``variants.VARIANTS``) as PyTorch modules: built from the packaged config registry
(no hub), wrapped depth-only for each input contract, and patched so that torch.export can trace their RoPE path
and folds the positional embedding of a fixed input shape into a constant.

Facts (the two export patches) come from specs/da3.md; the two input contracts from the DA3 seed. A variant with a
sky head (Mono-Large: ViT-L with a DPT head that also predicts sky) gives a second output, ``sky``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import types
from collections.abc import Iterator

import numpy as np

from stereo3d.errors import BadConfig
from stereo3d.models import names
from stereo3d.models.da3.variants import VARIANTS

CONTRACTS = names.DA3_CONTRACTS  # ("float", "uint8"): ImageNet-normalised float32 NCHW | uint8 RGB NHWC
DEFAULT_SIZE = names.DA3_DEFAULT_SIZE  # DA3's native 37x37 patch grid: the only size without a name suffix
PATCH_SIZE = 14  # DINOv2 patch side; PatchEmbed asserts sides are multiples of it
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def check_size(size: int) -> int:
    """A positive multiple of the patch size, else BadConfig."""
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0 or size % PATCH_SIZE:
        raise BadConfig(
            None, f"DA3 input side {size!r} must be a positive multiple of {PATCH_SIZE} (e.g. 140, 280, 518)"
        )
    return size


def check_shape(size) -> tuple[int, int]:
    """(width, height) of an export from a square side or a (width, height) pair, both sides checked."""
    width, height = (size, size) if isinstance(size, int) else tuple(size)
    return check_size(width), check_size(height)


def build_da3(variant: str):
    """A randomly initialised ``DepthAnything3Net`` (camera modules included) from the packaged config of the
    variant's row, checked against the row's ViT width and sky head.

    Only the config registry is used: ``depth_anything_3.api`` imports the hub client, cv2, trimesh...
    """
    check_choice("variant", variant, VARIANTS)
    row = VARIANTS[variant]
    os.environ.setdefault("DA3_LOG_LEVEL", "WARN")  # the package logger prints [INFO] lines to stdout
    with _quiet_import():
        from depth_anything_3.cfg import create_object, load_config
        from depth_anything_3.registry import MODEL_REGISTRY

        net = create_object(load_config(MODEL_REGISTRY[row.config]))
    # The checkpoint check and the exporter's outputs go by the row: a row that disagrees with the net it
    # builds (a typo, another depth_anything_3 release) would mislabel weights or drop the sky output.
    built = vit_width(net), has_sky_head(net)
    if built != (row.vit_width, row.sky):
        raise RuntimeError(
            f"DA3 {variant}: {row.config} builds ViT width {built[0]}, sky head {built[1]}; the variant table says "
            f"{row.vit_width}, {row.sky}"
        )
    return net


def vit_width(net) -> int:
    """The DINOv2 embedding width of a built net (the checkpoint's patch_embed.proj rows)."""
    return int(net.backbone.pretrained.patch_embed.proj.out_channels)


@contextlib.contextmanager
def export_patches() -> Iterator[None]:
    """Make the DINOv2 RoPE path exportable; restore the upstream methods afterwards (spec section 5).

    1. PositionGetter: an uncached meshgrid grid. `cartesian_prod` has no ONNX symbolic, and the cache
       would keep tracer values or FakeTensors that poison later eager calls.
    2. RoPE: the cos/sin table length from the static token count instead of `int(positions.max())`,
       a data-dependent value torch.export cannot specialise. Rows do not depend on the table length.
    """
    from depth_anything_3.model.dinov2.layers import rope

    saved = rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward
    rope.PositionGetter.__call__ = _meshgrid_positions
    rope.RotaryPositionEmbedding2D.forward = _rope_forward_static
    try:
        yield
    finally:
        rope.PositionGetter.__call__, rope.RotaryPositionEmbedding2D.forward = saved


@contextlib.contextmanager
def folded_positions(net, width: int, height: int) -> Iterator[None]:
    """Give the ViT its positional embedding for a ``width`` x ``height`` input as a constant buffer while
    exporting, so the graph holds the interpolated table instead of interpolating the 37x37 one on every call.

    The table is the upstream interpolation's own result, computed once here; the model is restored afterwards.
    """
    import torch

    vit = net.backbone.pretrained
    # Upstream names the input's (rows, columns) (w, h): `B, S, nc, w, h = x.shape` in prepare_tokens_with_masks.
    rows, cols = height, width
    tokens = torch.zeros(1, 1 + (rows // PATCH_SIZE) * (cols // PATCH_SIZE), vit.embed_dim)
    with torch.no_grad():
        table = vit.interpolate_pos_encoding(tokens, rows, cols).detach().clone()
    vit.register_buffer("folded_pos_embed", table, persistent=False)

    def fixed(self, x, w, h):
        if (w, h) != (rows, cols):
            raise ValueError(f"positional embedding folded for {cols}x{rows}, called for {h}x{w}")
        return self.folded_pos_embed

    vit.interpolate_pos_encoding = types.MethodType(fixed, vit)
    try:
        yield
    finally:
        del vit.interpolate_pos_encoding  # the instance attribute: the class method shows through again
        del vit._buffers["folded_pos_embed"]


def has_sky_head(net) -> bool:
    """Whether the net's head predicts sky (Mono-Large's DPT; Small/Base's DualDPT does not)."""
    return bool(getattr(net.head, "use_sky_head", False)) and type(net.head).__name__ == "DPT"


def depth_module(net, contract: str = "float"):
    """The depth-only wrapper for one contract (``net``'s camera modules should be None); a net with a sky head
    gives ``(depth, sky)``."""
    check_choice("contract", contract, CONTRACTS)
    return _wrappers()[contract](net).eval()


def normalise_image(rgb_u8: np.ndarray) -> np.ndarray:
    """uint8 [B,S,S,3] RGB -> float32 [B,3,S,S] ImageNet-normalised: the float contract's input."""
    x = rgb_u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


@functools.cache
def _wrappers() -> dict[str, type]:
    """The wrapper classes, defined on first use so that the name helpers import without torch
    (the Snakefile parses model names in an environment that may lack it)."""
    import torch

    class FloatDepth(torch.nn.Module):
        """`image` float32 [B,3,S,S] ImageNet-normalised -> `depth` [B,S,S]; one view per frame."""

        def __init__(self, net):
            super().__init__()
            self.net = net
            self.sky = has_sky_head(net)

        def forward(self, image):
            if self.sky:
                return self._depth_and_sky(image)
            # One view: ref_view_strategy only acts from 3 views on; "middle" is the seed's choice.
            out = self.net(
                image[:, None],
                extrinsics=None,
                intrinsics=None,
                export_feat_layers=[],
                infer_gs=False,
                use_ray_pose=False,
                ref_view_strategy="middle",
            )
            return out["depth"][:, 0]

        def _depth_and_sky(self, image):
            """The backbone and head alone: the net's forward would then overwrite sky depth with a quantile of
            randomly sampled pixels (data-dependent, not exportable); the runtime applies the sky instead."""
            views = image[:, None]
            feats, _ = self.net.backbone(views, cam_token=None, export_feat_layers=[], ref_view_strategy="middle")
            out = self.net._process_depth_head(feats, image.shape[-2], image.shape[-1])
            return out["depth"][:, 0], out["sky"][:, 0]

    class Uint8Depth(FloatDepth):
        """`image` uint8 [B,S,S,3] RGB 0..255 -> `depth` [B,S,S]; normalisation folded into the graph."""

        def __init__(self, net):
            super().__init__(net)
            # The same float32 operations, in the same order, as normalise_image: both contracts then
            # feed the network identical tensors (a fused scale/shift would differ in the last bits).
            self.register_buffer(
                "mean", torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(1, 3, 1, 1), persistent=False
            )
            self.register_buffer(
                "std", torch.tensor(IMAGENET_STD, dtype=torch.float32).view(1, 3, 1, 1), persistent=False
            )

        def forward(self, image):
            x = image.permute(0, 3, 1, 2).float() / 255.0
            return super().forward((x - self.mean) / self.std)

    return {"float": FloatDepth, "uint8": Uint8Depth}


def _meshgrid_positions(self, batch_size, height, width, device):
    """PositionGetter.__call__ without cache: the (y, x) grid, identical to cartesian_prod's."""
    import torch

    y, x = torch.meshgrid(torch.arange(height, device=device), torch.arange(width, device=device), indexing="ij")
    positions = torch.stack((y.reshape(-1), x.reshape(-1)), dim=-1)
    return positions.view(1, height * width, 2).expand(batch_size, -1, -1).clone()


def _rope_forward_static(self, tokens, positions):
    """RotaryPositionEmbedding2D.forward with the table sized by the token count, uncached."""
    import torch

    feature_dim = tokens.size(-1) // 2
    # Token count >= largest position + 1 (positions index a grid of those tokens, +1 for special tokens).
    seq_len = positions.shape[-2]
    exponents = torch.arange(0, feature_dim, 2, device=tokens.device).float() / feature_dim
    inv_freq = 1.0 / (self.base_frequency**exponents)
    angles = torch.einsum("i,j->ij", torch.arange(seq_len, device=tokens.device, dtype=inv_freq.dtype), inv_freq)
    angles = torch.cat((angles, angles), dim=-1).to(tokens.dtype)
    cos_comp, sin_comp = angles.cos(), angles.sin()
    vertical, horizontal = tokens.chunk(2, dim=-1)
    vertical = self._apply_1d_rope(vertical, positions[..., 0], cos_comp, sin_comp)
    horizontal = self._apply_1d_rope(horizontal, positions[..., 1], cos_comp, sin_comp)
    return torch.cat((vertical, horizontal), dim=-1)


def check_choice(what: str, value: str, valid) -> None:
    if value not in valid:
        raise BadConfig(None, f"{what} {value!r} is not one of {', '.join(valid)}")


@contextlib.contextmanager
def _quiet_import() -> Iterator[None]:
    """Harmless import-time warnings of the DA3 package: an OmegaConf resolver registered the deprecated
    way, and `torch.jit.script` decorators (deprecated in torch 2.13)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="omegaconf")
        warnings.filterwarnings("ignore", message=".*register_new_resolver.*")
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*", category=DeprecationWarning)
        yield
