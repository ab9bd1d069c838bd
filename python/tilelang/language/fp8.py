"""The float8 dtypes of the platform: E4M3 / E5M2 as CUDA has them ("fn": finite, with
NaN), or the "fnuz" variants (no negative zero) that AMD's gfx940-942 use."""
from __future__ import annotations


def _uses_fnuz() -> bool:
    try:
        import torch
    except ImportError:
        return False
    if getattr(torch.version, "hip", None) is None:
        return False
    if not torch.cuda.is_available():
        return True
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return getattr(props, "gcnArchName", "").startswith(("gfx940", "gfx941", "gfx942"))


def determine_fp8_type(fp8_format: str = "e4m3") -> str:
    """The TileLang dtype for fp8_format ("e4m3" or "e5m2") on this platform."""
    from ..dtypes import DType
    if fp8_format not in ("e4m3", "e5m2"):
        raise ValueError(f"Unsupported FP8 format: {fp8_format}")
    if _uses_fnuz():
        return DType("float8_e4m3fnuz" if fp8_format == "e4m3" else "float8_e5m2fnuz")
    return DType("float8_e4m3fn" if fp8_format == "e4m3" else "float8_e5m2")


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of determine_fp8_type(fp8_format)."""
    import torch
    name = str.__str__(determine_fp8_type(fp8_format))
    name = {"float8_e4m3": "float8_e4m3fn"}.get(name, name)
    dtype = getattr(torch, name, None)
    if dtype is None:
        raise RuntimeError(f"PyTorch does not expose dtype {name}")
    return dtype


__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]
