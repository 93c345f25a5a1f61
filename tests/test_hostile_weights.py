"""Hostile weights: missing, truncated, another model's, mis-shaped, and a pickle that tries to run code.

Each is refused in one line naming the file and the cause; no model file is left behind, no video is
converted, and the pickle's code never runs (the file it would create never appears).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import needs_export_extra
from harness import DA3_WEIGHTS, snakemake, stray_files, write_config

needs_export_extra("torch", "safetensors")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from stereo3d.demo.samples import make_clip  # noqa: E402
from stereo3d.demo.smoke import write_smoke_weights  # noqa: E402
from stereo3d.errors import BadWeights  # noqa: E402
from stereo3d.models.da3.checkpoint import check_weights_header  # noqa: E402
from stereo3d.models.nvds.checkpoint import read_state_dict  # noqa: E402

NVDS_WEIGHTS = "weights/NVDS/NVDS_Stabilizer.pth"


@pytest.fixture(scope="module")
def smoke_file(tmp_path_factory) -> Path:
    return write_smoke_weights(tmp_path_factory.mktemp("weights") / "model.safetensors", "small", seed=0)


class Pwn:
    """Unpickling this runs code: it writes ``sentinel``. weights_only loading must refuse it first."""

    def __init__(self, sentinel: Path):
        self.sentinel = str(sentinel)

    def __reduce__(self):
        return (exec, (f"open({self.sentinel!r}, 'w').write('code ran')",))


def write_pwn_checkpoint(path: Path, sentinel: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {"backbone.patch_embed1.proj.weight": torch.zeros(2)}, "hook": Pwn(sentinel)}, path)
    assert not sentinel.exists()  # saving does not run it either
    return path


def library(workdir: Path, weights: Path | None) -> Path:
    """A one-clip library with ``weights`` as the DA3 Small file."""
    make_clip(workdir / "videos/a.mp4", width=64, height=36, frames=4, fps="8")
    target = workdir / DA3_WEIGHTS
    target.parent.mkdir(parents=True, exist_ok=True)
    if weights is not None:
        target.write_bytes(weights.read_bytes())
    return target


def assert_refused_before_any_video(workdir: Path, run, needle: str) -> None:
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if needle in line]
    assert lines, run.stderr[-4000:]
    assert not (workdir / "results").exists()
    # Snakemake may make an output's folder before the job fails; no file may be in it, and no model anywhere.
    assert [path for path in (workdir / "models").rglob("*") if not path.is_dir()] == []
    assert list(workdir.rglob("*.onnx")) == []
    assert stray_files(workdir) == []


# --- header checks (torch-free, meant for parse time) ----------------------------------------------


def test_good_weights_pass_the_header_check(smoke_file):
    assert check_weights_header(smoke_file, "small")["stereo3d"] == "smoke"


def test_missing_weights_are_named(tmp_path):
    with pytest.raises(BadWeights, match="weights file not found"):
        check_weights_header(tmp_path / "model.safetensors", "small")


@pytest.mark.parametrize("keep", [0, 5, 100, 0.5, 0.999], ids=["empty", "5 bytes", "100 bytes", "half", "tail"])
def test_truncated_safetensors_are_refused_without_reading_tensors(smoke_file, tmp_path, keep):
    data = smoke_file.read_bytes()
    cut = tmp_path / "model.safetensors"
    cut.write_bytes(data[: int(keep * len(data)) if isinstance(keep, float) else keep])
    with pytest.raises(BadWeights, match=r"truncated|not a readable safetensors") as caught:
        check_weights_header(cut, "small")
    assert caught.value.path == cut and "\n" not in str(caught.value)


def test_another_models_checkpoint_is_named_as_such(tmp_path):
    other = tmp_path / "model.safetensors"
    save_file({"encoder.layer.0.weight": torch.zeros(4, 4), "decoder.bias": torch.zeros(4)}, str(other))
    with pytest.raises(BadWeights, match="not a DA3 checkpoint: no model.backbone.pretrained.patch_embed"):
        check_weights_header(other, "small")


def test_the_other_variants_weights_name_the_folder_mix_up(smoke_file):
    with pytest.raises(BadWeights, match="DA3 Small weights .* but the model is DA3 Base"):
        check_weights_header(smoke_file, "base")


def test_a_text_file_is_not_safetensors(tmp_path):
    text = tmp_path / "model.safetensors"
    text.write_text("git-lfs pointer: version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(BadWeights, match="not a readable safetensors file"):
        check_weights_header(text, "small")


# --- pickles that run code ----------------------------------------------------------------------


def test_a_pickle_that_runs_code_is_refused_without_running_it(tmp_path):
    sentinel = tmp_path / "pwned"
    path = write_pwn_checkpoint(tmp_path / "NVDS_Stabilizer.pth", sentinel)
    with pytest.raises(BadWeights, match="needs code to unpickle; refused") as caught:
        read_state_dict(path)
    assert "exec" in str(caught.value) and "\n" not in str(caught.value)
    assert not sentinel.exists()


# --- in the workflow ----------------------------------------------------------------------------


def test_missing_nvds_weights_stop_the_run_before_any_job(tmp_path, smoke_file):
    library(tmp_path, smoke_file)
    write_config(tmp_path, stabilise={"method": "nvds", "nvds_tier": "96x64"})
    run = snakemake(tmp_path, check=False)
    assert run.returncode != 0 and "NVDS weights not found" in run.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "models").exists()


def test_truncated_da3_weights_fail_the_export_in_one_line_and_convert_nothing(tmp_path, smoke_file):
    data = smoke_file.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[: len(data) // 3])
    library(tmp_path, cut)
    write_config(tmp_path)
    run = snakemake(tmp_path, check=False)
    assert_refused_before_any_video(tmp_path, run, f"bad weights: {DA3_WEIGHTS}: ")


def test_misshaped_da3_tensors_fail_the_export_naming_key_and_shapes(tmp_path, smoke_file):
    tensors = load_file(str(smoke_file))
    key = "model.backbone.pretrained.blocks.0.norm1.weight"
    tensors[key] = torch.zeros(tensors[key].shape[0] + 1)
    bad = tmp_path / "bad.safetensors"
    save_file(tensors, str(bad), metadata={"format": "pt"})
    del tensors
    library(tmp_path, bad)
    write_config(tmp_path)
    run = snakemake(tmp_path, check=False)
    needle = "tensors have the wrong shape: backbone.pretrained.blocks.0.norm1.weight"
    assert_refused_before_any_video(tmp_path, run, needle)


def test_a_code_running_nvds_pickle_fails_in_one_line_and_runs_nothing(tmp_path, smoke_file):
    sentinel = tmp_path / "pwned"
    library(tmp_path, smoke_file)
    write_pwn_checkpoint(tmp_path / NVDS_WEIGHTS, sentinel)
    write_config(tmp_path, stabilise={"method": "nvds", "nvds_tier": "96x64"}, export={"nvds_architecture": "tiny"})
    # The NVDS export alone (the DA3 export and the video jobs would only add minutes).
    run = snakemake(tmp_path, "models/NVDS/NVDS_Backbone_96x64.onnx", check=False)
    assert_refused_before_any_video(tmp_path, run, f"bad weights: {NVDS_WEIGHTS}: the file needs code to unpickle")
    assert not sentinel.exists()
    assert not list(tmp_path.rglob("pwned"))


def test_weight_errors_stop_the_run_before_any_video_job(tmp_path, smoke_file):
    data = smoke_file.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[: len(data) // 3])
    library(tmp_path, cut)
    write_config(tmp_path)
    run = snakemake(tmp_path, "--keep-going", check=False)
    assert run.returncode != 0 and f"bad weights: {DA3_WEIGHTS}: truncated" in run.stderr
    assert not (tmp_path / "work").exists()
