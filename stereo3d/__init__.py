"""stereo3d: 2D video libraries to stereoscopic 3D (DA3 depth, NVDS stabilisation, DIBR stereo)."""

__version__ = "0.1.0"
