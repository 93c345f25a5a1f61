"""The DA3 variants, one row each: everything that differs from one variant to the next.

The file names (``stereo3d.models.names``: the weights folder, the ONNX name and the wildcard regexes), the
model build, the checkpoint's variant check, the exporter's outputs and the export script all read this table;
``tests/test_registries.py`` ties the config schema's enums and ``config.yaml``'s documentation to it. Adding a
variant is a row here, its name in the schema's two ``variant`` enums and its line in ``config.yaml``.

Torch-free: the Snakefile reads it (through the names) in an environment that may lack torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str  # the value of da3.variant (and of export.da3_extra's variant)
    folder: str  # weights/DA3/<folder>/model.safetensors: the seed's hub layout
    hub: str  # the hub model whose model.safetensors goes in that folder, as it is
    config: str  # depth_anything_3's MODEL_REGISTRY key: the architecture the net is built from
    # DINOv2 embedding width (rows of backbone.pretrained.patch_embed.proj.weight): what tells one variant's
    # weights from another's, in the file's header alone. The build checks it against the built net.
    vit_width: int
    # A sky head (DPT with use_sky_head): the export gets a second output, ``sky``. The build checks it too.
    sky: bool
    onnx_part: str  # da3_<onnx_part>[_<side>|_<W>x<H>][_u8].onnx
    description: str  # config.yaml's words for it, after "<name>: folder <folder>, hub <hub>:"


VARIANTS: dict[str, Variant] = {
    row.name: row
    for row in (
        Variant(
            name="small",
            folder="Small",
            hub="DA3-SMALL",
            config="da3-small",
            vit_width=384,
            sky=False,
            onnx_part="small",
            description="ViT-S, the fastest. Apache-2.0.",
        ),
        Variant(
            name="base",
            folder="Base",
            hub="DA3-BASE",
            config="da3-base",
            vit_width=768,
            sky=False,
            onnx_part="base",
            description="ViT-B (102 M parameters), better depth. Apache-2.0.",
        ),
        Variant(
            name="mono_large",
            folder="Mono-Large",
            hub="DA3MONO-LARGE",
            config="da3mono-large",
            vit_width=1024,
            sky=True,
            onnx_part="mono_large",
            description="ViT-L made for monocular depth (334 M parameters, so ~3x slower than base), with a sky "
            "head whose sky goes to the far plane. Apache-2.0.",
        ),
    )
}
