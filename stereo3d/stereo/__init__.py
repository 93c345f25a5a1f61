"""Stereo geometry on numpy arrays: near maps from depth, shot cuts, the warp, and the layouts."""
