"""Tensors for kernels: the kinds of random inputs the profiler makes, dtype mapping to
torch, and a closeness check that tolerates a fraction of mismatched elements."""
from __future__ import annotations

from enum import Enum

import numpy as np

from ..dtypes import canonical, numpy_dtype


class TensorSupplyType(Enum):
    """What the profiler fills generated inputs with.

    Integer: small integers (-2..2; 0..2 for unsigned types; -128..127 for float8; 0/1 for bool).
    Uniform: uniform in [-1, 1) (ones for int8).  Normal: normal with mean -1 and standard
    deviation 1 (ones for int8).  Randn: standard normal.  Zero / One: all zeros / all ones.
    Auto: Uniform for float16 / bfloat16 / float32, Integer for every other type."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def map_torch_type(intype: str):
    """The torch dtype of a TileLang dtype name ("float16", "e4m3_float8", T.bfloat16, ...)."""
    import torch
    name = canonical(intype)
    table = {"float8_e4m3": "float8_e4m3fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
             "e4m3fnuz_float8": "float8_e4m3fnuz"}
    return getattr(torch, table.get(name, name))


def _static_shape(param):
    shape = []
    for e in param.shape:
        if getattr(e, "kind", "IntImm") != "IntImm":
            raise ValueError(f"TensorType must have a static shape, but parameter '{param.name}' has the "
                             f"dimension {e}; pass input_tensors yourself for a kernel with a dynamic shape")
        shape.append(int(getattr(e, "value", e)))
    return shape


def _kind(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    if dtype.startswith("uint"):
        return "unsigned"
    if dtype.startswith("float8"):
        return "float8"
    return "other"


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer, rng=None):
    """A function param -> numpy array of the parameter's static shape and dtype, filled as
    supply_type says. Random values come from rng (a numpy Generator), else from numpy's
    global generator, so that tilelang.testing.set_random_seed makes them repeatable."""
    if not isinstance(supply_type, TensorSupplyType):
        raise TypeError(f"tensor_supply_type must be a tilelang.TensorSupplyType, got {supply_type!r}")

    def integers(low, high, shape):
        if rng is not None:
            return rng.integers(low, high, size=shape)
        return np.random.randint(low, high, size=shape)

    def uniform(shape):
        return rng.uniform(-1.0, 1.0, size=shape) if rng is not None else np.random.uniform(-1.0, 1.0, size=shape)

    def normal(mean, shape):
        return rng.normal(mean, 1.0, size=shape) if rng is not None else np.random.normal(mean, 1.0, size=shape)

    def small_integers(dtype, shape):
        kind = _kind(dtype)
        if kind == "unsigned":
            return integers(0, 3, shape)
        if kind == "float8":
            return integers(-128, 128, shape)
        if kind == "bool":
            return integers(0, 2, shape)
        return integers(-2, 3, shape)

    def get_tensor(param):
        dtype = canonical(param.dtype)
        npd = numpy_dtype(dtype)
        if npd is None:
            raise TypeError(f"cannot make inputs of dtype {dtype} (parameter '{param.name}'): pass input_tensors")
        shape = _static_shape(param)
        kind = supply_type
        if kind is TensorSupplyType.Auto:
            kind = TensorSupplyType.Uniform if dtype in ("float16", "bfloat16", "float32") else TensorSupplyType.Integer
        if dtype == "int8" and kind in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
            values = np.ones(shape)
        elif kind is TensorSupplyType.Integer:
            values = small_integers(dtype, shape)
        elif kind is TensorSupplyType.Uniform:
            values = uniform(shape)
        elif kind is TensorSupplyType.Normal:
            values = normal(-1.0, shape)
        elif kind is TensorSupplyType.Randn:
            values = normal(0.0, shape)
        elif kind is TensorSupplyType.Zero:
            values = np.zeros(shape)
        else:
            values = np.ones(shape)
        if dtype.startswith("float8"):
            values = np.asarray(values, dtype=np.float32)
        return np.asarray(values).astype(npd)

    return get_tensor


def _to_numpy(x):
    """(array, dtype name, device) of a torch tensor, numpy array or array-like."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        import torch
        device = x.device.type
        name = canonical(x.dtype)
        t = x.detach().cpu()
        if t.dtype in (torch.bfloat16, torch.float16) or "float8" in name:
            t = t.float()
        return t.numpy(), name, device
    a = np.asarray(x)
    return a, canonical(a.dtype), "cpu"


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, verbose=False,
                       equal_nan=True, check_device=True, check_dtype=True, check_layout=True,
                       check_stride=False, base_name="LHS", ref_name="RHS"):
    """Asserts that tensor_a and tensor_b are close: |a - b| <= atol + rtol * |b| for all but
    at most int(numel * max_mismatched_ratio) elements. Shapes must match, and (by default)
    devices and dtypes. Takes torch tensors, numpy arrays or anything numpy can read; raises
    AssertionError naming the count, the first mismatch and the largest differences, and
    returns True otherwise."""
    a, a_dtype, a_dev = _to_numpy(tensor_a)
    b, b_dtype, b_dev = _to_numpy(tensor_b)
    if tuple(a.shape) != tuple(b.shape):
        raise AssertionError(f"The values for attribute 'shape' do not match: {tuple(a.shape)} != {tuple(b.shape)}.")
    if check_device and a_dev != b_dev:
        raise AssertionError(f"The values for attribute 'device' do not match: {a_dev} != {b_dev}.")
    if check_dtype and a_dtype != b_dtype:
        raise AssertionError(f"The values for attribute 'dtype' do not match: {a_dtype} != {b_dtype}.")
    a64 = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.int64)
    b64 = b.astype(np.float64) if b.dtype != np.bool_ else b.astype(np.int64)
    mismatched = ~np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    num_mismatched = int(mismatched.sum())
    total = int(a64.size)
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {num_mismatched} / {total} (allowed: {allowed})")
    if num_mismatched <= allowed:
        return True
    flat = int(np.argmax(mismatched.reshape(-1)))
    idx = [int(i) for i in np.unravel_index(flat, a64.shape)]
    av, bv = a64.reshape(-1)[flat], b64.reshape(-1)[flat]
    with np.errstate(invalid="ignore"):
        diff = np.abs(a64 - b64)
        rel = diff / (np.abs(b64) + 1e-12)
    raise AssertionError(
        f"Too many mismatched elements: {num_mismatched} > {allowed} ({max_mismatched_ratio * 100:.2f}% allowed, "
        f"but get {num_mismatched / total * 100:.2f}%).\n"
        f"First mismatch at index {idx}: {base_name.lower()}={av:.6f}, {ref_name.lower()}={bv:.6f}, "
        f"abs_diff={abs(av - bv):.6f}, rel_diff={abs(av - bv) / (abs(bv) + 1e-12):.6f}\n"
        f"Greatest absolute difference: {np.nanmax(diff)}, Greatest relative difference: {np.nanmax(rel)}\n"
        f"{base_name}: {a}\n{ref_name}: {b}")


__all__ = ["TensorSupplyType", "get_tensor_supply", "map_torch_type", "torch_assert_close"]
