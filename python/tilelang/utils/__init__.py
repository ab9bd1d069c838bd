"""Helpers TileLang programs import: tensor supply kinds, dtype mapping, closeness checks,
buffer scope predicates and target selection."""
from __future__ import annotations

from .language import array_reduce, is_fragment, is_global, is_local, is_local_var, is_shared, is_shared_dynamic
from .target import determine_target
from .tensor import TensorSupplyType, get_tensor_supply, map_torch_type, torch_assert_close

__all__ = ["TensorSupplyType", "get_tensor_supply", "map_torch_type", "torch_assert_close", "determine_target",
           "array_reduce", "is_fragment", "is_global", "is_local", "is_local_var", "is_shared", "is_shared_dynamic"]
