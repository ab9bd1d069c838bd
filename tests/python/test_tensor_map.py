"""TMA tensor maps from Python: the encoder's checks (no GPU needed, they come before the
driver), how the CUDA launch path builds, caches and passes maps (with a stand-in kernel, and
through the real bindings against the stand-in driver the C++ tests build), and, on a Hopper
GPU, a map of a torch tensor read by a real TMA kernel."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangShapeError, TileLangTypeError, TileLangUnsupportedError
from tilelang.jit import backends

ADDRESS = 0x7F0000000000


def encode(dtype="float16", address=ADDRESS, shape=(1024, 512), strides=(512, 1), box=(64, 64), swizzle=128):
    return _C.encode_tensor_map(dtype, address, list(shape), list(strides), list(box), swizzle)


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(shape=(), strides=(), box=()), TileLangShapeError, "1 to 5 dimensions"),
    (dict(shape=(2,) * 5 + (16,), strides=(512, 256, 128, 64, 16, 1), box=(1,) * 5 + (16,), swizzle=0),
     TileLangShapeError, "has 6"),
    (dict(box=(64,)), TileLangShapeError, "box (64,) has 1 dimensions but the tensor's shape (1024, 512) has 2"),
    (dict(strides=(1,)), TileLangShapeError, "strides (1,)"),
    (dict(strides=(1024, 2)), TileLangUnsupportedError, "innermost dimension contiguous"),
    (dict(shape=(1024, 500), strides=(500, 1), box=(64, 16), swizzle=32), TileLangUnsupportedError,
     "has stride 500 (1000 bytes)"),
    (dict(strides=(1 << 39, 1)), TileLangUnsupportedError, "below 2^40"),
    (dict(address=ADDRESS + 8), TileLangUnsupportedError, "16-byte-aligned global address, got 0x7f0000000008"),
    (dict(box=(257, 64)), TileLangShapeError, "extent 257, outside 1..256"),
    (dict(box=(64, 12)), TileLangShapeError, "24 bytes, not a multiple of 16"),
    (dict(box=(64, 128)), TileLangShapeError, "256 bytes, wider than its 128-byte swizzle"),
    (dict(swizzle=16), TileLangUnsupportedError, "swizzle of 16 bytes does not exist"),
    (dict(dtype="bool"), TileLangUnsupportedError, "dtype bool"),
    (dict(dtype="float4_e2m1"), TileLangUnsupportedError, "dtype float4_e2m1"),
    (dict(dtype="no_such_type"), TileLangTypeError, "unknown dtype"),
    (dict(shape=(0, 512)), TileLangShapeError, "outside 1..2^32"),
])
def test_encode_checks_its_arguments(kwargs, error, text):
    with pytest.raises(error) as info:
        encode(**kwargs)
    assert text in str(info.value)
    assert info.value.hint


@pytest.mark.skipif(tilelang.cuda_available(), reason="the error is for machines without a CUDA device")
def test_encode_without_a_device_is_unsupported():
    with pytest.raises(TileLangUnsupportedError, match="no usable CUDA device"):
        encode()


# ---- the launch path, with a stand-in kernel ----------------------------------------------

def _func(dynamic=False, strides=None):
    m = T.dynamic("m") if dynamic else 256

    @T.prim_func
    def main(A: T.Tensor((m, 64), "float16", strides=strides), B: T.Tensor((m, 64), "float16"),
             alpha: T.float32):
        with T.Kernel(1, threads=128) as bx:
            B[bx, 0] = A[bx, 0]

    return main


class _FakeFunction:
    def __init__(self):
        self.launches = []

    def launch(self, grid, block, smem, stream, args, programmatic, cooperative):
        assert programmatic is False and cooperative is False  # no T.pdl_sync / T.sync_grid here
        self.launches.append((grid, args))


class _CountingC:
    """_C with encode_tensor_map recorded and answered without a driver."""

    def __init__(self):
        self.calls = []

    def encode_tensor_map(self, dtype, address, shape, strides, box, swizzle):
        self.calls.append((dtype, address, shape, strides, box, swizzle))
        return bytes([len(self.calls)]) * 128

    def __getattr__(self, name):
        return getattr(_C, name)


def _executable(monkeypatch, func, grid=(1, 1, 1)):
    """A CudaExecutable whose one kernel takes (A, B, alpha, [m,] map of A, map of B)."""
    fake_c = _CountingC()
    monkeypatch.setattr(backends, "_C", fake_c)
    params = [("buffer", "A", "float16", 0), ("buffer", "B", "float16", 1), ("scalar", "alpha", "float32", 2)]
    if any(e.kind != "IntImm" for e in func.params[0].shape):
        params.append(("shape", "m", "int64", -1))
    params += [("tensormap", "A_map", "float16", 0, (64, 64), 128), ("tensormap", "B_map", "float16", 1, (32, 64), 0)]
    exe = object.__new__(backends.CudaExecutable)
    fn = _FakeFunction()
    maps = [backends._TensorMapParam(pos, p, func.params) for pos, p in enumerate(params) if p[0] == "tensormap"]
    exe.pointer_params = {0: "A", 1: "B"}
    exe._launches = [(fn, {"grid": []}, [p for p in params if p[0] != "tensormap"], maps, list(grid),
                      [128, 1, 1], 0)]
    return exe, fn, fake_c


def test_launch_passes_maps_last_and_encodes_each_tensor_once(monkeypatch):
    exe, fn, fake_c = _executable(monkeypatch, _func())
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.5}, {}, 0)
    assert fake_c.calls == [("float16", 0x10000, [256, 64], [64, 1], [64, 64], 128),
                            ("float16", 0x20000, [256, 64], [64, 1], [32, 64], 0)]
    _, args = fn.launches[0]
    assert args[:3] == [("handle", 0x10000), ("handle", 0x20000), ("float32", 1.5)]
    assert args[3] == ("tensormap", bytes([1]) * 128) and args[4] == ("tensormap", bytes([2]) * 128)
    exe.run({0: 0x10000, 1: 0x20000, 2: 2.5}, {}, 0)  # same tensors: nothing encoded
    assert len(fake_c.calls) == 2
    assert fn.launches[1][1][3:] == args[3:]
    exe.run({0: 0x30000, 1: 0x20000, 2: 2.5}, {}, 0)  # a new A only
    assert [c[1] for c in fake_c.calls] == [0x10000, 0x20000, 0x30000]


def test_dynamic_shapes_and_declared_strides_reach_the_map(monkeypatch):
    exe, fn, fake_c = _executable(monkeypatch, _func(dynamic=True))
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.0}, {"m": 100}, 0)
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.0}, {"m": 300}, 0)
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.0}, {"m": 100}, 0)
    assert [c[2] for c in fake_c.calls] == [[100, 64], [100, 64], [300, 64], [300, 64]]
    assert fn.launches[0][1][3] == ("int64", 100)
    exe, fn, fake_c = _executable(monkeypatch, _func(strides=(128, 1)))
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.0}, {}, 0)
    assert fake_c.calls[0][3] == [128, 1] and fake_c.calls[1][3] == [64, 1]


def test_an_empty_grid_encodes_nothing(monkeypatch):
    exe, fn, fake_c = _executable(monkeypatch, _func(), grid=(0, 1, 1))
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.0}, {}, 0)
    assert fake_c.calls == [] and fn.launches == []


# ---- the bindings against a stand-in driver ----------------------------------------------

def _fake_driver():
    """The stand-in libcuda the C++ tests build (tests/cpp/fake_driver), with cuTensorMapEncodeTiled."""
    root = Path(__file__).resolve().parents[2]
    found = sorted(root.glob("build/*/libfake_driver_tma1.so"))
    if not found:
        pytest.skip("the stand-in CUDA driver is built with the C++ tests (TILELANG_BUILD_TESTS=ON)")
    return str(found[0])


# Run in a child process, from a file: the driver is loaded once per process, and this one may have looked
# for the real one already.
_FAKE_DRIVER_SCRIPT = textwrap.dedent("""
    import ctypes, os, struct
    import tilelang.language as T
    from tilelang import _C
    from tilelang.errors import TileLangTypeError
    from tilelang.jit import backends

    fake = ctypes.CDLL(os.environ["TILELANG_CUDA_DRIVER_PATH"])
    fake.fake_cuda_param_address.restype = ctypes.c_uint64
    fake.fake_cuda_param_bytes.restype = ctypes.POINTER(ctypes.c_uint8)

    def expect(*sizes):
        fake.fake_cuda_expect_params((ctypes.c_int * len(sizes))(*sizes), len(sizes))

    def param(i, n):
        return ctypes.string_at(fake.fake_cuda_param_bytes(i), n), fake.fake_cuda_param_address(i)

    assert _C.cuda_device_available(), _C.cuda_unavailable_reason()
    pattern = bytes((i * 3 + 1) % 256 for i in range(128))  # what the stand-in encodes
    assert _C.encode_tensor_map("float16", 0x10000, [256, 64], [64, 1], [64, 64], 128) == pattern

    # Launch slots: 8 bytes each for the others, 128 at 64-byte alignment for tensor maps.
    fn = _C.CudaModule(b"\\x7fELF").function("k")
    other = bytes(range(128, 256))
    expect(8, 128, 4, 128, 8)
    fn.launch([1, 1, 1], [32, 1, 1], 0, 0, [("handle", 0x123450), ("tensormap", pattern), ("int32", -5),
                                            ("tensormap", other), ("float64", 0.5)])
    assert param(0, 8)[0] == struct.pack("<q", 0x123450)
    assert param(1, 128)[0] == pattern and param(1, 128)[1] % 64 == 0
    assert param(2, 4)[0] == struct.pack("<i", -5)
    assert param(3, 128)[0] == other and param(3, 128)[1] % 64 == 0
    assert param(4, 8)[0] == struct.pack("<d", 0.5)
    for bad, text in ((pattern[:127], "128 bytes, got 127"), (bytearray(pattern), "must be bytes")):
        try:
            fn.launch([1, 1, 1], [32, 1, 1], 0, 0, [("tensormap", bad)])
        except TileLangTypeError as e:
            assert text in str(e), str(e)
        else:
            raise AssertionError("a bad tensor map was launched")

    # The launch path: a kernel of (A, B, alpha) with a map of A, encoded once for two calls.
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16"), alpha: T.float32):
        with T.Kernel(1, threads=128) as bx:
            B[bx, 0] = A[bx, 0]

    infos = _C.cuda_kernel_infos(_C.lower(main.handle, "cuda -arch=sm_90a"))
    infos[0]["params"].append(("tensormap", "A_map", "float16", 0, (64, 64), 128))
    exe = backends.CudaExecutable(infos, b"\\x7fELF", "", "", main.params)
    expect(8, 8, 4, 128)
    calls = fake.fake_cuda_encode_calls()
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.5}, {}, 0)
    exe.run({0: 0x10000, 1: 0x20000, 2: 1.5}, {}, 0)
    assert fake.fake_cuda_encode_calls() == calls + 1
    assert param(0, 8)[0] == struct.pack("<q", 0x10000) and param(2, 4)[0] == struct.pack("<f", 1.5)
    assert param(3, 128)[0] == pattern and param(3, 128)[1] % 64 == 0
    print("ok")
""")


def test_bindings_and_launch_path_against_a_stand_in_driver(tmp_path):
    env = dict(os.environ, TILELANG_CUDA_DRIVER_PATH=_fake_driver(), TILELANG_DISABLE_CACHE="1")
    script = tmp_path / "stand_in_driver.py"  # kernels are parsed from their source file
    script.write_text(_FAKE_DRIVER_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


# ---- on a GPU ----------------------------------------------------------------------------

def _torch_cuda_or_skip():
    if not tilelang.cuda_available():
        pytest.skip("no CUDA GPU: " + _C.cuda_unavailable_reason())
    torch = pytest.importorskip("torch", reason="the GPU tests take device tensors from torch")
    if not torch.cuda.is_available():
        pytest.skip("torch does not see the CUDA GPU")
    return torch


def test_encode_a_map_of_a_torch_tensor():
    torch = _torch_cuda_or_skip()
    t = torch.zeros((256, 128), dtype=torch.bfloat16, device="cuda")
    m = _C.encode_tensor_map("bfloat16", t.data_ptr(), list(t.shape), list(t.stride()), [64, 64], 128)
    assert isinstance(m, bytes) and len(m) == 128 and any(m)


_TMA_KERNEL = r"""
struct alignas(64) TensorMap { unsigned long long opaque[16]; };
// One block reads box (rows x cols) (blockIdx.y, blockIdx.x) of a float tensor through the
// map and writes it into out, rows gridDim.x * cols wide.
extern "C" __global__ void tma_tile(const __grid_constant__ TensorMap map, float* out, int rows, int cols) {
  __shared__ alignas(128) float tile[64 * 64];
  __shared__ alignas(8) unsigned long long barrier;
  unsigned bar = unsigned(__cvta_generic_to_shared(&barrier));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(rows * cols * 4));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(unsigned(__cvta_generic_to_shared(tile))), "l"(&map), "r"(int(blockIdx.x) * cols),
                    "r"(int(blockIdx.y) * rows), "r"(bar) : "memory");
  }
  __syncthreads();
  asm volatile("{\n .reg .pred p;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n"
               " @!p bra WAIT;\n}\n" :: "r"(bar) : "memory");
  int width = gridDim.x * cols;
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x)
    out[(blockIdx.y * rows + i / cols) * width + blockIdx.x * cols + i % cols] = tile[i];
}
"""


def test_a_tma_kernel_reads_a_torch_tensor_through_the_map():
    torch = _torch_cuda_or_skip()
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs compute capability 9.0 or newer")
    # The module must outlive the launch: its functions are valid only while it is loaded.
    module = _C.CudaModule(_C.nvrtc_compile(_TMA_KERNEL, "tma.cu", _C.cuda_device_arch(0), []))
    fn = module.function("tma_tile")
    x = torch.arange(1, 100 * 72 + 1, dtype=torch.float32, device="cuda").reshape(100, 72)
    rows, cols = 32, 16
    m = _C.encode_tensor_map("float32", x.data_ptr(), list(x.shape), list(x.stride()), [rows, cols], 0)
    out = torch.full((128, 80), -1.0, device="cuda")
    fn.launch([5, 4, 1], [128, 1, 1], 0, 0, [("tensormap", m), ("handle", out.data_ptr()), ("int32", rows),
                                             ("int32", cols)])
    torch.cuda.synchronize()
    want = torch.zeros((128, 80), device="cuda")  # past the tensor's edge TMA reads zeros
    want[:100, :72] = x
    assert torch.equal(out, want)
    with pytest.raises(TileLangTypeError, match="128 bytes, got 64"):
        fn.launch([1, 1, 1], [128, 1, 1], 0, 0, [("tensormap", m[:64]), ("handle", out.data_ptr()),
                                                 ("int32", rows), ("int32", cols)])
