"""DA3 hub weights: smoke files in the real layout load cleanly; every bad file fails in one line."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import needs_export_extra

needs_export_extra("torch", "safetensors", "depth_anything_3.cfg")

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from stereo3d.demo.smoke import write_smoke_weights  # noqa: E402
from stereo3d.errors import BadWeights  # noqa: E402
from stereo3d.models.da3.checkpoint import ALIAS_KEYS, is_smoke_weights, load_da3_weights  # noqa: E402
from stereo3d.models.da3.model import build_da3  # noqa: E402
from stereo3d.models.da3.variants import VARIANTS  # noqa: E402


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    return write_smoke_weights(tmp_path_factory.mktemp("da3w") / "Small" / "model.safetensors", "small")


@pytest.fixture(scope="module")
def small_tensors(small_file):
    return load_file(str(small_file))


@pytest.fixture(scope="module")
def small_net():
    # Failing loads raise before load_state_dict, so one model serves every test.
    return build_da3("small")


def _write(path, tensors, metadata=None):
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def _one_line_error(excinfo, *fragments):
    message = str(excinfo.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_smoke_file_has_the_hub_layout(small_file):
    with safe_open(str(small_file), framework="pt") as fh:
        keys = list(fh.keys())
        metadata = fh.metadata()
    assert len(keys) == 437
    assert all(k.startswith("model.") for k in keys)
    assert not set(ALIAS_KEYS) & {k.removeprefix("model.") for k in keys}  # aliases stored once
    assert {"model.cam_enc.pose_branch.fc1.weight", "model.backbone.pretrained.camera_token"} <= set(keys)
    assert metadata["stereo3d"] == "smoke"
    assert is_smoke_weights(small_file)


def test_smoke_weights_are_reproducible(small_file, tmp_path):
    again = write_smoke_weights(tmp_path / "model.safetensors", "small")
    assert again.read_bytes() == small_file.read_bytes()


def test_smoke_weights_load_cleanly(small_net, small_file, small_tensors):
    facts = load_da3_weights(small_net, small_file)
    assert facts == {"tensors": 437, "cast_from": [], "smoke": True}
    state = small_net.state_dict()
    token = "backbone.pretrained.camera_token"  # on the depth path even with one view (spec section 3)
    assert torch.equal(state[token], small_tensors["model." + token])
    for alias, source in ALIAS_KEYS.items():
        assert torch.equal(state[alias], small_tensors["model." + source])


def test_half_precision_file_is_cast_to_float32(small_net, small_tensors, tmp_path):
    path = _write(tmp_path / "half.safetensors", {k: v.half() for k, v in small_tensors.items()})
    assert load_da3_weights(small_net, path)["cast_from"] == ["float16"]
    assert small_net.state_dict()["head.norm.weight"].dtype == torch.float32
    assert not is_smoke_weights(path)


def test_missing_file_is_named(small_net, tmp_path):
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, tmp_path / "Small" / "model.safetensors")
    _one_line_error(excinfo, "Small/model.safetensors", "not found")


def test_truncated_file_is_rejected(small_net, small_file, tmp_path):
    data = small_file.read_bytes()
    path = tmp_path / "model.safetensors"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, path)
    _one_line_error(excinfo, str(path), "truncated or corrupt")


def test_unexpected_key_is_named(small_net, small_tensors, tmp_path):
    tensors = dict(small_tensors, **{"model.head.extra.weight": torch.zeros(3)})
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, _write(tmp_path / "extra.safetensors", tensors))
    _one_line_error(excinfo, "1 unexpected keys", "head.extra.weight", "438 tensors")


def test_missing_key_is_named(small_net, small_tensors, tmp_path):
    tensors = {k: v for k, v in small_tensors.items() if k != "model.backbone.pretrained.camera_token"}
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, _write(tmp_path / "missing.safetensors", tensors))
    _one_line_error(excinfo, "1 missing keys (backbone.pretrained.camera_token)")


def test_only_the_six_alias_keys_may_be_missing(small_net, small_tensors, tmp_path):
    # Without the stored .0.2 LayerNorm the aliases cannot be filled either: 2 + 6 keys missing.
    tensors = {k: v for k, v in small_tensors.items() if ".output_conv2_aux.0.2." not in k}
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, _write(tmp_path / "no_ln.safetensors", tensors))
    _one_line_error(excinfo, "8 missing keys", "output_conv2_aux.0.2.bias")


def test_misshaped_tensor_names_key_and_shapes(small_net, small_tensors, tmp_path):
    tensors = dict(small_tensors, **{"model.head.scratch.output_conv1.weight": torch.zeros(32, 64, 1, 1)})
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, _write(tmp_path / "shape.safetensors", tensors))
    _one_line_error(excinfo, "head.scratch.output_conv1.weight file [32, 64, 1, 1] vs model [32, 64, 3, 3]")


def test_another_models_file_is_not_a_da3_checkpoint(small_net, tmp_path):
    other = {"module.encoder.conv1.weight": torch.zeros(8, 3, 3, 3), "module.head.bias": torch.zeros(8)}
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, _write(tmp_path / "nvds.safetensors", other))
    _one_line_error(excinfo, "not a DA3 checkpoint", "2 tensors")


def test_base_weights_into_small_say_so(small_net, tmp_path):
    base = write_smoke_weights(tmp_path / "Base" / "model.safetensors", "base")
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(small_net, base)
    _one_line_error(excinfo, "DA3 Base weights", "model is DA3 Small", "wrong variant")


# -- Mono-Large: the same one-line errors, on files of its key layout with tiny tensors (the checks that fail
#    come before any shape is compared, so the 1.3 GB of real tensors are not needed) -------------------------


@pytest.fixture(scope="module")
def mono_net():
    return build_da3("mono_large")


@pytest.fixture(scope="module")
def mono_tiny(mono_net):
    """Every key of a Mono-Large hub file, each a tiny tensor (the ViT width tensor keeps its 1024 rows)."""
    tensors = {f"model.{k}": torch.zeros(1) for k in mono_net.state_dict()}
    tensors["model.backbone.pretrained.patch_embed.proj.weight"] = torch.zeros(1024, 1, 1, 1)
    return tensors


def test_mono_large_has_a_dpt_head_with_sky_and_no_aux_aliases(mono_net):
    from stereo3d.models.da3.model import has_sky_head

    keys = set(mono_net.state_dict())
    assert has_sky_head(mono_net) and not has_sky_head(build_da3("small"))
    assert any(k.startswith("head.scratch.sky_output_conv2.") for k in keys)
    assert not set(ALIAS_KEYS) & keys and not any(k.startswith(("cam_enc.", "cam_dec.")) for k in keys)


def test_mono_large_missing_unexpected_and_misshaped_keys_are_named(mono_net, mono_tiny, tmp_path):
    missing = {k: v for k, v in mono_tiny.items() if k != "model.head.scratch.sky_output_conv2.0.weight"}
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(mono_net, _write(tmp_path / "missing.safetensors", missing))
    _one_line_error(excinfo, "1 missing keys (head.scratch.sky_output_conv2.0.weight)")
    extra = dict(mono_tiny, **{"model.head.extra.weight": torch.zeros(1)})
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(mono_net, _write(tmp_path / "extra.safetensors", extra))
    _one_line_error(excinfo, "1 unexpected keys (head.extra.weight)")
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(mono_net, _write(tmp_path / "shapes.safetensors", mono_tiny))
    _one_line_error(excinfo, "tensors have the wrong shape", "file [1] vs model")


def test_small_weights_into_mono_large_say_so(mono_net, small_file):
    with pytest.raises(BadWeights) as excinfo:
        load_da3_weights(mono_net, small_file)
    _one_line_error(excinfo, "DA3 Small weights", "model is DA3 Large", "wrong variant")


def test_the_header_check_knows_mono_large(small_file, tmp_path, mono_tiny):
    from stereo3d.models.da3.checkpoint import check_weights_header

    path = _write(tmp_path / "mono.safetensors", mono_tiny)
    check_weights_header(path, "mono_large")
    with pytest.raises(BadWeights) as excinfo:
        check_weights_header(small_file, "mono_large")
    _one_line_error(excinfo, "DA3 Small weights", "wrong variant")


# -- the variant table: its architecture numbers are those of the net each row builds ------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_row_is_the_net_it_builds(variant, request):
    from stereo3d.models.da3.model import has_sky_head

    row = VARIANTS[variant]
    built = {"small": "small_net", "mono_large": "mono_net"}
    net = request.getfixturevalue(built[variant]) if variant in built else build_da3(variant)
    # The tensor the header check reads (model.backbone.pretrained.patch_embed.proj.weight) has the row's width.
    assert net.state_dict()["backbone.pretrained.patch_embed.proj.weight"].shape[0] == row.vit_width
    assert has_sky_head(net) == row.sky
    assert any(k.startswith("head.scratch.sky_output_conv2.") for k in net.state_dict()) == row.sky


def test_a_row_that_disagrees_with_its_net_stops_the_build(monkeypatch):
    monkeypatch.setitem(VARIANTS, "small", dataclasses.replace(VARIANTS["small"], vit_width=768))
    with pytest.raises(RuntimeError, match="builds ViT width 384, sky head False; the variant table says 768"):
        build_da3("small")
