"""How the profiler and the autotuner make input tensors (upstream's TensorSupplyType)."""
from __future__ import annotations

from enum import Enum

import numpy as np


class TensorSupplyType(Enum):
    Integer = 1   # small integers (exact in every dtype, so results compare exactly)
    Uniform = 2   # uniform in [-1, 1) (unsigned: [0, 1))
    Normal = 3    # standard normal
    Randn = 4     # standard normal
    Zero = 5
    One = 6
    Auto = 7      # integers for integer dtypes, standard normal for floating point ones


def make_array(shape, np_dtype, supply_type: TensorSupplyType, rng: np.random.Generator) -> np.ndarray:
    """A host array of shape and dtype filled as supply_type says."""
    supply_type = TensorSupplyType(supply_type) if not isinstance(supply_type, TensorSupplyType) else supply_type
    dt = np.dtype(np_dtype)
    shape = tuple(int(s) for s in shape)
    if supply_type is TensorSupplyType.Zero:
        return np.zeros(shape, dtype=dt)
    if supply_type is TensorSupplyType.One:
        return np.ones(shape, dtype=dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(dt)
    integer = np.issubdtype(dt, np.integer)
    unsigned = integer and np.issubdtype(dt, np.unsignedinteger)
    if integer or supply_type is TensorSupplyType.Integer:
        low, high = (0, 4) if unsigned else (-2, 3) if supply_type is TensorSupplyType.Integer else (-4, 4)
        return rng.integers(low, high, size=shape).astype(dt)
    if supply_type is TensorSupplyType.Uniform:
        return rng.uniform(-1.0, 1.0, size=shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)
