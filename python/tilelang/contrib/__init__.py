"""Helpers upstream programs import from tilelang.contrib (the CUDA toolchain's facts)."""
