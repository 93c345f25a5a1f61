"""NVDS model and checkpoint: the module tree matches the released state dict; both attention forms agree."""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from stereo3d.demo.smoke import random_state_dict, write_smoke_checkpoint
from stereo3d.errors import BadWeights
from stereo3d.models.nvds.checkpoint import is_smoke, load_nvds, read_state_dict
from stereo3d.models.nvds.model import NVDS, NvdsConfig, parameter_count

TINY = NvdsConfig.tiny()
# sha256 of the published state-dict key list (the spec's nvds_state_dict_keys.tsv: its "key<TAB>shape<TAB>dtype"
# rows, comment line dropped, each ending in a newline), so the key check runs on any machine. Point this variable
# at a copy of the list to also compare it row by row (a readable diff when the digest fails).
KEYS_TSV_ENV = "NVDS_KEYS_TSV"
PUBLISHED_KEYS_SHA256 = "9c8c66ed8572866d384e001bba00a2dcdaaf4c78473f52559899f9af9eb4dcc5"
# Static vs faithful: not the same float operations (the static form adds biases after the matrix products, where
# nn.Linear fuses them into addmm, and projects q/k/v per head), so some values round differently, by amounts that
# depend on the CPU and BLAS. Compared before the final ReLU, where the head's output is of order 1 (std ~0.5, max
# ~3 here). Measured: max abs 1.2e-6 to 1.7e-6 at these sizes; the full model 3.1e-6 at 256x128 and 3.8e-6 at
# 512x288 (up to ~6e-6 on other machines). 1e-5 is ~80 float32 ulps at 1, room for any BLAS, and far below what a
# real fault gives (two keys swapped in one window: 2.5e-3; the unfold masks dropped: 0.14).
STATIC_MAX_ABS = 1e-5


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Two shared cores: intra-op threading makes these tiny models 20x slower, not faster.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_state():
    return random_state_dict(TINY, seed=3)


def _window(height, width, batch=1, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 4, 4, height, width, generator=gen)
    x[:, :, 3] = torch.rand(batch, 4, height, width, generator=gen)
    return x


def _model(state, attention="faithful", size=None):
    model = NVDS(TINY, attention=attention)
    model.load_state_dict(state, strict=True)
    if size:
        model.prepare(*size)
    return model.eval()


def test_full_model_state_dict_matches_the_released_key_list():
    with torch.device("meta"):
        model = NVDS(NvdsConfig())
    state = model.state_dict()
    rows = [f"module.{k}\t{list(v.shape)}\t{str(v.dtype).removeprefix('torch.')}" for k, v in state.items()]
    assert len(rows) == 1235
    assert parameter_count(model) == 88_537_890
    if os.environ.get(KEYS_TSV_ENV):
        published = Path(os.environ[KEYS_TSV_ENV]).read_text().splitlines()
        assert rows == [line for line in published if not line.startswith("#")]  # same keys, order, shapes, dtypes
    assert hashlib.sha256("".join(r + "\n" for r in rows).encode()).hexdigest() == PUBLISHED_KEYS_SHA256


def test_tiny_config_is_the_spec_test_config():
    model = NVDS(TINY)
    assert len(model.state_dict()) == 219
    assert 310_000 < parameter_count(model) < 320_000


def _outputs(model, x):
    """The model's output, and the head's before the final ReLU (of order 1, and nothing clipped away)."""
    seen = []
    hook = model.Stabilizer.register_forward_hook(lambda module, args, out: seen.append(out))
    try:
        with torch.no_grad():
            out = model(x)
    finally:
        hook.remove()
    return out, seen[0]


# 64x96 and 40x52 pad the 1/4-scale map to whole windows, 56x84 needs no padding, 36x44 is one window high
@pytest.mark.parametrize("size", [(64, 96), (40, 52), (56, 84), (36, 44)])
def test_static_attention_equals_faithful_to_float_rounding(tiny_state, size):
    assert tiny_state["Stabilizer.decoder_focal.blocks.0.attn.relative_position_bias_table"].abs().min() > 0
    x = _window(*size)
    faithful, faithful_head = _outputs(_model(tiny_state), x)
    static, static_head = _outputs(_model(tiny_state, "static", size), x)
    assert faithful.shape == (1, 1, *size)
    assert faithful_head.std() > 0.1  # of order 1: the bound is meant for that scale
    assert (static_head - faithful_head).abs().max() <= STATIC_MAX_ABS
    assert (static - faithful).abs().max() <= STATIC_MAX_ABS


def test_static_form_refuses_another_size(tiny_state):
    with pytest.raises(ValueError, match="prepared for 96x64"):
        _model(tiny_state, "static", (64, 96))(_window(32, 32))


def test_split_backbone_and_head_equal_the_monolith(tiny_state):
    model = _model(tiny_state, "static", (64, 96))
    x = _window(64, 96)
    with torch.no_grad():
        whole = model(x)
        per_frame = [model.features(x[:, t]) for t in range(4)]
        feats = tuple(torch.cat([f[s] for f in per_frame]) for s in range(4))
        split = model.head(feats, x[:, -1, 0:3])
    assert torch.allclose(whole, split, rtol=0, atol=1e-5)
    assert (whole >= 0).all()


def test_a_batch_of_windows_equals_windows_one_by_one(tiny_state):
    model = _model(tiny_state, "static", (32, 64))
    x = _window(32, 64, batch=2)
    with torch.no_grad():
        both = model(x)
        singles = torch.cat([model(x[i : i + 1]) for i in range(2)])
    assert torch.allclose(both, singles, rtol=0, atol=1e-5)


def test_smoke_checkpoint_has_the_released_layout_and_loads_strictly(tmp_path):
    path = write_smoke_checkpoint(tmp_path / "NVDS_Stabilizer.pth", TINY, seed=0)
    raw = torch.load(path, map_location="cpu", weights_only=True)
    assert all(k.startswith("module.") for k in raw) and len(raw) == 219
    model = load_nvds(path, TINY)
    assert is_smoke(path)
    with torch.no_grad():
        out = model(_window(64, 64))
    assert torch.isfinite(out).all() and out.std() > 0 and (out > 0).float().mean() > 0.05


def test_smoke_checkpoint_bytes_depend_only_on_the_seed(tmp_path):
    a = write_smoke_checkpoint(tmp_path / "a.pth", TINY, seed=1).read_bytes()
    b = write_smoke_checkpoint(tmp_path / "b" / "other_name.pth", TINY, seed=1).read_bytes()
    assert hashlib.sha256(a).digest() == hashlib.sha256(b).digest()


def test_a_real_checkpoint_is_not_marked_smoke(tiny_state):
    assert not is_smoke(tiny_state)


def test_wrapped_checkpoints_are_unwrapped(tmp_path, tiny_state):
    for wrapper in ("state_dict", "model"):
        torch.save({wrapper: OrderedDict(("module." + k, v) for k, v in tiny_state.items())}, tmp_path / "w.pth")
        assert list(read_state_dict(tmp_path / "w.pth")) == list(tiny_state)


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def _bad_files(tmp: Path, state) -> dict[str, tuple[Path, str]]:
    good = tmp / "good.pth"
    torch.save(OrderedDict(("module." + k, v) for k, v in state.items()), good)
    cases = {"missing": (tmp / "absent.pth", "not found")}
    torch.save({"x": _Evil()}, tmp / "evil.pth")
    cases["pickle"] = (tmp / "evil.pth", "refused")
    (tmp / "cut.pth").write_bytes(good.read_bytes()[:5000])
    cases["truncated"] = (tmp / "cut.pth", "unreadable or truncated")
    torch.save({"encoder.layer.0.weight": torch.zeros(2)}, tmp / "other.pth")
    cases["other model"] = (tmp / "other.pth", "not an NVDS checkpoint")
    fewer = OrderedDict(list(state.items())[:-4])
    fewer["extra.weight"] = torch.zeros(1)
    torch.save(fewer, tmp / "keys.pth")
    cases["keys"] = (
        tmp / "keys.pth",
        "4 missing (edge_conv.0.weight, edge_conv.0.bias, edge_conv1.0.weight, ...); 1 unexpected (extra.weight)",
    )
    shaped = OrderedDict(state)
    shaped["edge_conv.0.bias"] = torch.zeros(5)
    torch.save(shaped, tmp / "shape.pth")
    cases["shape"] = (tmp / "shape.pth", "edge_conv.0.bias: file [5], model [8]")
    indexed = OrderedDict(state)
    key = "Stabilizer.decoder_focal.blocks.1.attn.relative_position_index_clips_2"
    indexed[key] = indexed[key].flip(0)
    torch.save(indexed, tmp / "index.pth")
    cases["index buffer"] = (tmp / "index.pth", "differs from the recomputed one")
    return cases


@pytest.mark.parametrize("case", ["missing", "pickle", "truncated", "other model", "keys", "shape", "index buffer"])
def test_bad_checkpoints_fail_with_one_line_naming_file_and_cause(tmp_path, tiny_state, case, capsys):
    path, cause = _bad_files(tmp_path, tiny_state)[case]
    with pytest.raises(BadWeights) as info:
        load_nvds(path, TINY)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and cause in message
    assert "this must never run" not in capsys.readouterr().out
