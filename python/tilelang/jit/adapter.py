"""Arguments of a kernel call: checked against the kernel's parameters, then turned into
the pointer array the compiled entry point takes. Nothing runs on bad input."""
from __future__ import annotations

import numpy as np

from .. import _C
from ..dtypes import canonical, numpy_dtype, torch_dtype


class ArrayView:
    __slots__ = ("ptr", "shape", "strides", "dtype", "lib", "device", "obj", "readonly")

    def __init__(self, ptr, shape, strides, dtype, lib, device, obj, readonly=False):
        self.ptr, self.shape, self.strides, self.dtype = ptr, shape, strides, dtype
        self.lib, self.device, self.obj = lib, device, obj
        self.readonly = readonly  # a numpy array that must not be written


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def view_of(x, param_name: str) -> ArrayView:
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            # Kernels read and write memory in the machine's byte order; converting here would
            # silently drop the results written into an output.
            raise ValueError(f"argument '{param_name}' has non-native byte order (dtype '{x.dtype.str}'); "
                             f"convert it first: a.astype(a.dtype.newbyteorder('='))")
        itemsize = x.dtype.itemsize
        strides = tuple(s // itemsize for s in x.strides) if itemsize else x.strides
        return ArrayView(x.__array_interface__["data"][0], x.shape, strides, canonical(x.dtype),
                         "numpy", "cpu", x, not x.flags.writeable)
    if getattr(x, "__tilelang_webgpu__", False):  # tilelang.jit.webgpu.DeviceArray
        strides, step = [], 1
        for d in reversed(x.shape):
            strides.insert(0, step)
            step *= d
        return ArrayView(0, x.shape, tuple(strides), canonical(x.dtype), "webgpu", "webgpu", x)
    if _is_torch(x):
        return ArrayView(x.data_ptr(), tuple(x.shape), tuple(x.stride()), canonical(x.dtype), "torch",
                         x.device.type, x)
    if hasattr(x, "__dlpack__"):
        device_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
        if device_type in (2, 13, 10):  # kDLCUDA, kDLCUDAManaged, kDLROCM: viewed through torch, zero-copy
            try:
                import torch
            except ImportError as e:
                raise TypeError(f"argument '{param_name}': a CUDA DLPack tensor ({type(x).__name__}) needs torch "
                                "installed to be read") from e
            return view_of(torch.from_dlpack(x), param_name)
        try:
            arr = np.from_dlpack(x)
        except Exception as e:  # a device array numpy cannot view
            raise TypeError(f"argument '{param_name}': cannot read this {type(x).__name__} through DLPack "
                            f"on the CPU ({e})") from e
        v = view_of(arr, param_name)
        v.readonly = False  # the producer's own memory: numpy's flag on the view is not the owner's
        return v
    raise TypeError(f"argument '{param_name}' must be an array (numpy, torch, any DLPack tensor, or a "
                    f"tilelang.jit.webgpu.DeviceArray), "
                    f"got {type(x).__name__}")


class Binder:
    """Resolves the parameters' symbolic shapes from the arguments and checks them."""

    def __init__(self, kernel_name: str):
        self.kernel_name = kernel_name
        self.values = {}    # shape variable name -> int
        self.origin = {}    # shape variable name -> "A.shape[0]"
        self.deferred = []  # compound extents (e.g. 2 * m), checked once all are bound

    def dim(self, spec, actual: int, where: str, param: str, shape, given):
        """Checks one extent against its spec: ("const", n), ("var", name) or ("expr", e).
        shape is the parameter's declared shape, for the message."""
        kind, payload = spec
        if kind == "const":
            if payload != actual:
                raise ValueError(f"{self.kernel_name}: argument '{param}' has shape {tuple(given)}, "
                                 f"expected {shape_text(shape)}")
            return
        if kind == "var":
            if payload in self.values:
                if self.values[payload] != actual:
                    raise ValueError(
                        f"{self.kernel_name}: dynamic dimension '{payload}' is {self.values[payload]} from "
                        f"{self.origin[payload]} but {actual} from {where}")
            else:
                self.values[payload] = actual
                self.origin[payload] = where
            return
        self.deferred.append((payload, actual, where, param, shape, given))

    def evaluate(self, expr):
        if expr.kind == "IntImm":
            return expr.value
        if expr.kind == "Var":
            if expr.name not in self.values:
                raise ValueError(f"{self.kernel_name}: dynamic dimension '{expr.name}' is not given by any "
                                 "input, so the output cannot be allocated")
            return self.values[expr.name]
        return _C.eval_int(expr, self.values)

    def finish(self):
        for expr, actual, where, param, shape, given in self.deferred:
            if self.evaluate(expr) != actual:
                raise ValueError(f"{self.kernel_name}: argument '{param}' has shape {tuple(given)}, "
                                 f"expected {shape_text(shape)}")


def dim_spec(expr):
    """How a declared extent is checked, decided once per kernel rather than per call."""
    kind = expr.kind
    if kind == "IntImm":
        return ("const", expr.value)
    if kind == "Var":
        return ("var", expr.name)
    return ("expr", expr)


def shape_text(shape) -> str:
    parts = [str(e.value) if e.kind == "IntImm" else repr(e) for e in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def scalar_rule(dtype: str):
    """How a scalar argument of dtype is checked: ("int", (lowest, highest)) for integers,
    ("float", None) or ("bool", None)."""
    if dtype == "bool":
        return ("bool", None)
    npd = numpy_dtype(dtype)
    if npd is not None and np.issubdtype(npd, np.integer):
        info = np.iinfo(npd)
        return ("int", (int(info.min), int(info.max)))
    return ("float", None)


def check_scalar(kernel_name: str, param, rule, value):
    """value as the Python number passed to the kernel, or a TypeError / ValueError that
    names the parameter: a float for an integer parameter is not truncated, an integer out
    of the dtype's range is not wrapped."""
    if not isinstance(value, (int, float, bool, np.integer, np.floating, np.bool_)):
        raise TypeError(f"{kernel_name}: argument '{param.name}' must be a {param.dtype} scalar, "
                        f"got {type(value).__name__}")
    kind, bounds = rule
    if kind == "int":
        if isinstance(value, (float, np.floating)):
            raise TypeError(f"{kernel_name}: argument '{param.name}' is an integer ({param.dtype}) parameter, "
                            f"got the float {value!r}; pass an int (int(x) if truncation is meant)")
        v = int(value)
        lo, hi = bounds
        if not lo <= v <= hi:
            raise ValueError(f"{kernel_name}: argument '{param.name}' = {v} is out of range for {param.dtype} "
                             f"(from {lo} to {hi})")
        return v
    return value


def allocate(lib: str, shape, dtype: str, like=None):
    if lib == "webgpu":
        from .webgpu import empty
        npd = numpy_dtype(dtype)
        if npd is None:
            raise TypeError(f"no numpy dtype stores {dtype}; pass the output explicitly")
        return empty(shape, npd)
    if lib == "torch":
        import torch
        return torch.empty(shape, dtype=torch_dtype(dtype), device=like.device if like is not None else "cpu")
    npd = numpy_dtype(dtype)
    if npd is None:
        raise TypeError(f"no numpy dtype stores {dtype}; pass the output explicitly")
    return np.empty(shape, dtype=npd)
