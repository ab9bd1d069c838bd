"""Properties of the CUDA device, read from the driver (as upstream's
tilelang.carver.arch.driver, which persistent kernels use to size their grid:
`T.Kernel(driver.get_num_sms(), ...)`). Attributes are the CUDA device attribute numbers
(cudaDevAttr* / CU_DEVICE_ATTRIBUTE_*, the same values)."""
from __future__ import annotations

import ctypes

MAX_THREADS_PER_BLOCK = 1
MAX_SHARED_MEMORY_PER_BLOCK = 8
WARP_SIZE = 10
MAX_REGISTERS_PER_BLOCK = 12
MULTIPROCESSOR_COUNT = 16
L2_CACHE_SIZE = 38
COMPUTE_CAPABILITY_MAJOR = 75
COMPUTE_CAPABILITY_MINOR = 76
MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
MAX_REGISTERS_PER_MULTIPROCESSOR = 82
MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
MAX_PERSISTING_L2_CACHE_SIZE = 108

_libcuda = None  # the loaded driver library, False once loading has failed


def _driver():
    """The CUDA driver (libcuda), initialised; None where there is none."""
    global _libcuda
    if _libcuda is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            _libcuda = lib if lib.cuInit(0) == 0 else False
        except OSError:
            _libcuda = False
    return _libcuda or None


def _device(lib, device_id):
    dev = ctypes.c_int()
    return dev.value if lib.cuDeviceGet(ctypes.byref(dev), int(device_id)) == 0 else None


def get_device_attribute(attr: int, device_id: int = 0):
    """The value of a device attribute, or None when it cannot be read (no driver or device)."""
    lib = _driver()
    if lib is None:
        return None
    dev = _device(lib, device_id)
    if dev is None:
        return None
    value = ctypes.c_int()
    if lib.cuDeviceGetAttribute(ctypes.byref(value), int(attr), dev) != 0:
        return None
    return value.value


def _required(attr, device_id, what):
    value = get_device_attribute(attr, device_id)
    if value is None:
        raise RuntimeError(f"Failed to get device properties ({what} of CUDA device {device_id}: "
                           "no CUDA driver or device)")
    return value


def _in_unit(size, format):
    units = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}
    if format not in units:
        raise ValueError("Invalid format. Must be one of: bytes, kb, mb")
    return size // units[format]


def get_cuda_device_properties(device_id: int = 0):
    """torch's properties of the device (name, multi_processor_count, ...), or None without
    torch or a device."""
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(device_id)
    except Exception:  # no torch, or torch without CUDA
        pass
    return None


def get_device_name(device_id: int = 0) -> str:
    lib = _driver()
    dev = _device(lib, device_id) if lib is not None else None
    name = ctypes.create_string_buffer(256)
    if dev is None or lib.cuDeviceGetName(name, 256, dev) != 0:
        raise RuntimeError(f"Failed to get device properties (name of CUDA device {device_id})")
    return name.value.decode()


def get_num_sms(device_id: int = 0) -> int:
    """The number of streaming multiprocessors."""
    return _required(MULTIPROCESSOR_COUNT, device_id, "the multiprocessor count")


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block may use without opting in (48 KiB on current GPUs)."""
    return _in_unit(_required(MAX_SHARED_MEMORY_PER_BLOCK, device_id, "shared memory per block"), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory of a multiprocessor (what upstream reports as the dynamic maximum)."""
    return _in_unit(_required(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device_id, "shared memory per multiprocessor"),
                    format)


def get_persisting_l2_cache_max_size(device_id: int = 0):
    return get_device_attribute(MAX_PERSISTING_L2_CACHE_SIZE, device_id)


def get_registers_per_block(device_id: int = 0):
    return get_device_attribute(MAX_REGISTERS_PER_BLOCK, device_id)
