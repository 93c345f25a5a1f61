"""Temporal stabilisers: one segment's raw DA3 depth → its near maps (0..1, larger = nearer).

One module per method, each declaring itself once as a :class:`Stabiliser` (see ``registry``), with the options
that change its maps; ``NearSettings`` (``settings``) is what a video's near maps are made with. The workflow
(cache keys, the inputs of the ``near_plan`` and ``near_maps`` rules, the models to export), the config check,
bench/ and the docs read that table; nothing else names a method.
"""

from stereo3d.stabilisers.registry import NearJob, Stabiliser, get_stabiliser, stabilisers
from stereo3d.stabilisers.settings import NearSettings

__all__ = ["NearJob", "NearSettings", "Stabiliser", "get_stabiliser", "stabilisers"]
