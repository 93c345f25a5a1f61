"""Seeded random "smoke" weights in the real file layouts, for the demo, tests and bench/: every loading path runs
for real, and the depth they give is meaningless. Each file carries a mark that the exports and the runtime
report loudly (DA3: safetensors metadata; NVDS: the unused ``Stabilizer.conv_seg`` weight).

Needs torch (the export extra).
"""

from __future__ import annotations

import io
import logging
from collections import OrderedDict
from pathlib import Path

import torch

from stereo3d.io.atomic import atomic_output
from stereo3d.models.da3.checkpoint import SMOKE_KEY as DA3_SMOKE_KEY
from stereo3d.models.da3.checkpoint import SMOKE_VALUE as DA3_SMOKE_VALUE
from stereo3d.models.da3.checkpoint import sort_safetensors_header
from stereo3d.models.da3.model import build_da3
from stereo3d.models.nvds.checkpoint import PREFIX, SMOKE_KEY, SMOKE_TAG
from stereo3d.models.nvds.model import NVDS, NvdsConfig, Tier

log = logging.getLogger(__name__)

# --- DA3 ---------------------------------------------------------------------------------------------------------
DEPTH_CONV = "head.scratch.output_conv2.2"  # last conv before the exp activation
# Random init gives a near-constant depth (~1.1); x40 on the final conv gives a wide range (spec section 6).
SMOKE_DEPTH_GAIN = 40.0
# ...and a fixed depth-channel bias: Base's random bias x40 puts its smoke depth near 1e-4, Small's near 300;
# with this one both land in a few..hundreds range (exp activation), where runtime epsilons do not bite.
SMOKE_DEPTH_BIAS = 3.0


def write_smoke_weights(path: str | Path, variant: str, seed: int = 0) -> Path:
    """Seeded random weights in the real hub layout, marked as smoke, written atomically.

    Layout as the hub mixin writes it: ``model.`` + DepthAnything3Net keys, shared tensors saved once
    (437 tensors). The final depth conv is scaled so the smoke depth map shows visible variation.
    """
    from safetensors.torch import save_model

    path = Path(path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build_da3(variant)
    conv = net.get_submodule(DEPTH_CONV)
    with torch.no_grad():
        conv.weight.mul_(SMOKE_DEPTH_GAIN)
        conv.bias.mul_(SMOKE_DEPTH_GAIN)
        conv.bias[0] = SMOKE_DEPTH_BIAS  # channel 0 is depth, channel 1 confidence (pruned from the graph)
    hub = torch.nn.Module()
    hub.model = net  # the DepthAnything3 hub wrapper's only child
    metadata = {DA3_SMOKE_KEY: DA3_SMOKE_VALUE, "variant": variant, "seed": str(seed), "format": "pt"}
    with atomic_output(path) as tmp:
        save_model(hub, str(tmp), metadata=metadata)
        sort_safetensors_header(tmp)
    return path


# --- NVDS --------------------------------------------------------------------------------------------------------
def write_smoke_checkpoint(path: str | Path, config: NvdsConfig | None = None, seed: int = 0) -> Path:
    """Seeded random weights in the released layout (flat, ``module.`` prefix, index buffers), saved atomically.

    Outputs of a model with these weights are finite and vary with the input, but mean nothing.
    """
    path = Path(path)
    state = random_state_dict(config or NvdsConfig(), seed=seed, smoke_mark=True)
    prefixed = OrderedDict((PREFIX + k, v) for k, v in state.items())
    buf = io.BytesIO()
    # A file object keeps torch's internal archive name fixed ("archive"), so the bytes do not depend on
    # the temporary file name: the same seed gives the same file.
    torch.save(prefixed, buf)
    with atomic_output(path) as tmp:
        tmp.write_bytes(buf.getvalue())
    log.warning(
        "%s: wrote SMOKE NVDS weights (seed %d): outputs are meaningless until real weights are placed", path, seed
    )
    return path


def random_state_dict(config: NvdsConfig, seed: int = 0, smoke_mark: bool = False) -> OrderedDict[str, torch.Tensor]:
    """Every float tensor random (tables and pooling layers too: zeros or means would hide indexing bugs).

    Scales keep activations in range: weights ~ 1/sqrt(fan_in), norms around 1, biases small.
    """
    template = NVDS(config).state_dict()
    gen = torch.Generator().manual_seed(seed)
    state = OrderedDict()
    for key, ref in template.items():
        if not ref.dtype.is_floating_point:
            state[key] = ref.clone()  # index buffers: the deterministic values
            continue
        noise = torch.randn(ref.shape, generator=gen, dtype=torch.float32)
        name = key.rsplit(".", 1)[-1]
        if "bias_table" in key:
            value = 0.5 * noise
        elif "pool_layers" in key and name == "weight":
            value = (1.0 + 0.5 * noise) / ref.shape[-1]  # around a mean, but every position distinct
        elif name == "bias":
            value = 0.05 * noise
        elif ref.dim() == 1:  # LayerNorm weight
            value = 1.0 + 0.1 * noise
        else:
            value = noise / (ref[0].numel() ** 0.5)
        state[key] = value.contiguous()
    if smoke_mark:
        mark = torch.zeros_like(state[SMOKE_KEY]).reshape(-1)
        mark[: len(SMOKE_TAG)] = torch.tensor(list(SMOKE_TAG), dtype=mark.dtype)
        state[SMOKE_KEY] = mark.reshape(state[SMOKE_KEY].shape)
        _centre_output(state, config)
    return state


def _centre_output(state: OrderedDict, config: NvdsConfig) -> None:
    """Shift the last conv's bias so most of the pre-ReLU output is positive.

    Random weights leave it mostly negative, and the final ReLU would then give a flat zero map, which
    exercises nothing downstream. Rounded so the file's bytes do not hang on float noise.
    """
    model = NVDS(config).eval()
    model.load_state_dict(state)
    gen = torch.Generator().manual_seed(1)
    window = torch.rand(1, 4, 4, 64, 64, generator=gen) * 4.0 - 2.0
    window[:, :, 3] = torch.rand(1, 4, 64, 64, generator=gen)
    with torch.no_grad():
        feats = model.backbone(window[0])
        edge = model.edge_conv(window[:, -1, 0:3])
        pre_relu = model.Stabilizer(feats, edge, model.edge_conv1(edge), Tier(64, 64))
    key = "Stabilizer.AO.adapt_conv.3.bias"
    shift = float(pre_relu.std() - pre_relu.median())
    state[key] = torch.round((state[key] + shift) * 100.0) / 100.0
