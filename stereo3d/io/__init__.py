"""Video and map I/O: ffmpeg, probe, decode, encode, mux, the map store and atomic writes."""
