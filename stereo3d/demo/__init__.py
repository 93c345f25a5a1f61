"""The self-contained demo: generated sample clips and seeded smoke weights."""
