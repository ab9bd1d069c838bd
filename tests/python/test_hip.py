"""Target hip (AMD GPUs) without an AMD GPU: the suite's kernels are lowered for hip, turned
into HIP C++ and, where hipcc is installed, compiled for CDNA 2 (gfx90a), CDNA 3 (gfx940,
gfx942) and RDNA 3 (gfx1100) as far as that hipcc knows each; the code objects are read
back for scratch use and spills. Nothing here runs a kernel on an AMD device."""
import functools
import re
import subprocess

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangUnsupportedError
from tilelang.jit.hip import _runtime as hip_runtime, hip_device_status, hipcc_compile, hipcc_path
from tilelang.jit.kernel import _include_dir

from kernels.gemm import matmul
from kernels.softmax import softmax
from test_cuda_compile import CASES as CUDA_CASES

# float8 is refused on hip (test_float8_is_refused), and the multi-stage GEMMs and the
# pipelined attention, sized for CUDA's 163-227 KiB of shared memory, need more than 64 KiB
# of LDS (test_cuda_sized_pipelines_exceed_the_lds); the same pipelines in tiles that fit
# take their place. Every other suite kernel must compile.
TOO_BIG_FOR_64K = {"flash_attention_mma_pipelined", "gemm_fp16_mma_transposed_4_stages"}
CASES = {name: make for name, make in CUDA_CASES.items() if "fp8" not in name and name not in TOO_BIG_FOR_64K}
CASES.update({
    "gemm_bf16_3_stages_64x64": lambda: matmul(512, 512, 256, 64, 64, 32, in_dtype="bfloat16", num_stages=3),
    "gemm_fp16_transposed_2_stages": lambda: matmul(256, 256, 256, 64, 64, 32, in_dtype="float16",
                                                    transpose_A=True, transpose_B=True, num_stages=2, threads=256),
    "gemm_int8_2_stages": lambda: matmul(256, 256, 256, 64, 64, 64, in_dtype="int8", out_dtype="int32",
                                         accum_dtype="int32", transpose_B=True, num_stages=2),
})
ARCHS = ["gfx90a", "gfx940", "gfx942", "gfx1100"]

TRIVIAL = '#include "tl/hip/tl_hip.h"\nextern "C" __global__ void probe(float* p) { p[threadIdx.x] = 1.0f; }\n'


def first_error(e):
    lines = str(e).splitlines()
    return next((line.strip() for line in lines[1:] if "error" in line), lines[-1])


@functools.lru_cache(maxsize=None)
def toolchain_support(arch):
    """("object" | "assembly" | None, why): how far this hipcc compiles for arch."""
    if hipcc_path() is None:
        return None, "hipcc is not installed (Debian: apt-get install hipcc; not part of make system-deps)"
    try:
        hipcc_compile(TRIVIAL, arch, _include_dir())
        return "object", ""
    except tilelang.errors.TileLangInternalError as object_error:
        try:
            hipcc_compile(TRIVIAL, arch, _include_dir(), assembly=True)
        except tilelang.errors.TileLangInternalError as e:
            return None, f"this hipcc does not know {arch}: {first_error(e)}"
        return "assembly", (f"this hipcc compiles {arch} but has no device libraries for it "
                            f"({first_error(object_error)})")


def readelf():
    for tool in ("llvm-readelf", "llvm-readelf-15", "/usr/lib/llvm-15/bin/llvm-readelf"):
        try:
            subprocess.run([tool, "--version"], capture_output=True, check=True)
            return tool
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


def objdump():
    # LLVM 15's first: the one hipcc 5.2 compiles with knows gfx940.
    for tool in ("llvm-objdump-15", "/usr/lib/llvm-15/bin/llvm-objdump", "llvm-objdump"):
        try:
            subprocess.run([tool, "--version"], capture_output=True, check=True)
            return tool
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


def kernel_notes(code_object, tmp_path):
    """Each kernel's resource metadata from the code object's notes: name -> {key: int}."""
    tool = readelf()
    if tool is None:
        pytest.skip("llvm-readelf is not installed: the code object's metadata cannot be read")
    path = tmp_path / "kernel.co"
    path.write_bytes(code_object)
    text = subprocess.run([tool, "--notes", str(path)], capture_output=True, text=True, check=True).stdout
    kernels = {}
    for block in text.split("  - .agpr_count")[1:] if ".agpr_count" in text else text.split("  - ")[1:]:
        name = re.search(r"\.name:\s+(\S+)", block)
        if not name:
            continue
        kernels[name.group(1)] = {k: int(v) for k, v in re.findall(r"\.(\w+):\s+(\d+)\s*$", block, re.M)}
    return kernels


def hip_source(func, arch):
    target = f"hip -arch={arch}"
    lowered = _C.lower(func.handle, target)
    return lowered, _C.codegen(lowered, target)


# ---------------------------------------------------------------------- targets

def test_target_strings():
    assert _C.normalise_target("hip -arch=gfx942") == "hip -arch=gfx942"
    assert _C.normalise_target("rocm -arch=gfx90a") == "hip -arch=gfx90a"
    assert _C.normalise_target("hip") == "hip"
    with pytest.raises(TileLangUnsupportedError, match="unknown AMD architecture 'gfx908'") as info:
        _C.normalise_target("hip -arch=gfx908")
    assert "gfx90a, gfx940, gfx942, gfx950, gfx1100, gfx1201" in str(info.value)
    with pytest.raises(TileLangUnsupportedError, match="unknown option '-subgroup=32'"):
        _C.normalise_target("hip -arch=gfx942 -subgroup=32")


def test_hip_without_an_architecture_is_refused():
    with pytest.raises(TileLangUnsupportedError, match="target 'hip' needs an AMD architecture"):
        tilelang.compile(softmax(256, 512), target="hip")
    with pytest.raises(TileLangUnsupportedError, match="names no AMD architecture"):
        _C.lower(softmax(256, 512).handle, "hip")


def test_lds_limit_per_architecture():
    """A block asking for more than 64 KiB of LDS is refused on gfx942 and fits gfx950's 160 KiB;
    LDS is counted at each type's size (bfloat16 2 bytes, int8 1)."""
    func = CUDA_CASES["gemm_fp16_mma_transposed_4_stages"]()  # 96 KiB of tiles
    with pytest.raises(TileLangUnsupportedError, match="65536"):
        _C.lower(func.handle, "hip -arch=gfx942")
    _C.lower(func.handle, "hip -arch=gfx950")
    for fits in ("gemm_bf16_mma_3_stages", "gemm_int8_mma"):  # 48 KiB each
        _C.lower(CUDA_CASES[fits]().handle, "hip -arch=gfx942")


@pytest.mark.parametrize("case", sorted(TOO_BIG_FOR_64K))
def test_cuda_sized_pipelines_exceed_the_lds(case):
    with pytest.raises(TileLangUnsupportedError, match="bytes of shared memory per block; target hip allows at "
                                                      "most 65536") as e:
        _C.lower(CUDA_CASES[case]().handle, "hip -arch=gfx90a")
    assert "hint: use fewer pipeline stages" in str(e.value) or "smaller tiles" in str(e.value)


# ---------------------------------------------------------------------- generated source

def test_reductions_shuffle_over_the_wavefront():
    """The wavefront is the shuffle group: 64 lanes on CDNA, 32 on RDNA; HIP's shuffles
    take no lane mask."""
    _, cdna = hip_source(softmax(256, 512), "gfx942")
    _, rdna = hip_source(softmax(256, 512), "gfx1100")
    assert "tl::shfl_xor(row_max_red, 16, 64)" in cdna
    assert "tl::shfl_xor(row_max_red, 16, 32)" in rdna
    assert "_sync" not in cdna and '#include "tl/hip/tl_hip.h"' in cdna


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_nvidia_instruction_is_generated(case):
    lowered, source = hip_source(CASES[case](), "gfx942")
    assert "__global__" in source
    for nvidia in ("asm", "__shfl_xor_sync", "ldmatrix", "mma_", "wgmma", "tma_", "mbarrier", "__nv_",
                   "__grid_constant__", "__cluster_dims__"):
        assert nvidia not in source, (case, nvidia)
    report = lowered.lowering_report()
    if "gemm" in case or "attention" in case:
        # Every product runs on MFMA but attention's float32 P V (a float32 register A
        # operand), which keeps its Q K^T on SIMT too (they share P), reported as slower.
        if case == "flash_attention_fp32_ragged":
            assert "on SIMT multiply-adds (a register A operand must be float16 or bfloat16)" in report, report
            assert "[slower path: not on the matrix cores: a register A operand must be float16 or bfloat16]" in report
        else:
            assert "on MFMA v_mfma_" in report and "SIMT" not in report, report
            assert "tl::mfma_" in source


def test_pipelines_copy_with_plain_loads():
    lowered, source = hip_source(CASES["gemm_bf16_3_stages_64x64"](), "gfx90a")
    report = lowered.lowering_report()
    assert "pipelined: 2 copies ahead into 3 buffers of A_shared B_shared" in report
    assert "(plain loads and stores into LDS: no asynchronous copies on hip)" in report
    assert "tl::cp_async<16>" in source and "tl::bfloat16_t" in source


def test_float8_is_refused():
    func = CUDA_CASES["gemm_fp8_e4m3_mma"]()
    with pytest.raises(TileLangUnsupportedError, match="tensor 'A' has dtype float8_e4m3, which target hip does not support") as e:
        _C.lower(func.handle, "hip -arch=gfx942")
    assert e.value.line is not None


def test_clusters_are_refused_at_the_users_line():
    @T.prim_func
    def clustered(A: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64, cluster_dims=(2, 1, 1)) as bx:  # the line the error names
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[bx * 64 + i] + 1.0

    with pytest.raises(TileLangUnsupportedError) as e:
        _C.lower(clustered.handle, "hip -arch=gfx942")
    assert "hip" in str(e.value) and e.value.line is not None


# ---------------------------------------------------------------------- running

def test_call_without_an_amd_device_says_why():
    kernel = tilelang.compile(softmax(256, 512), target="hip -arch=gfx942")
    assert kernel.get_kernel_source().startswith("// Generated by the TileLang HIP back end")
    x = np.zeros((256, 512), np.float32)
    with pytest.raises(TileLangUnsupportedError, match="cannot run a kernel compiled for 'hip -arch=gfx942'") as e:
        kernel(x, np.empty_like(x))
    assert hip_device_status() in str(e.value)
    assert "no AMD GPU is present" in hip_device_status() or "no HIP runtime" in hip_device_status()


# ---------------------------------------------------------------------- hipcc

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_hip_source_compiles(case, arch, tmp_path):
    support, why = toolchain_support(arch)
    if support is None:
        pytest.skip(why)
    _, source = hip_source(CASES[case](), arch)
    if support == "assembly":
        asm = hipcc_compile(source, arch, _include_dir(), assembly=True).decode()
        wave32 = ".amdhsa_wavefront_size32 1" in asm
        assert wave32 == arch.startswith("gfx1"), arch
        pytest.skip(f"assembly only: {why}; scratch is not checked (calls into the device library stay unresolved)")
    code_object = hipcc_compile(source, arch, _include_dir())
    assert code_object[:4] == b"\x7fELF"
    notes = kernel_notes(code_object, tmp_path)
    assert notes, "no kernel metadata in the code object"
    for name, meta in notes.items():
        assert meta.get("wavefront_size") == 64, (name, meta)
        assert meta.get("private_segment_fixed_size") == 0, (case, name, meta)  # no scratch
        assert meta.get("vgpr_spill_count") == 0 and meta.get("sgpr_spill_count") == 0, (case, name, meta)


def test_isa_of_the_pipelined_gemm_and_the_softmax(tmp_path):
    """gfx90a machine code: the GEMM multiplies with v_mfma (and no FMA loop) from LDS filled
    by 16-byte loads; the softmax's shuffles are cross-lane operations (DPP or ds_bpermute /
    ds_swizzle), not LDS round trips of the whole row."""
    support, why = toolchain_support("gfx90a")
    if support != "object":
        pytest.skip(why or "gfx90a code objects cannot be built here")
    tool = objdump()
    if tool is None:
        pytest.skip("llvm-objdump is not installed")

    def isa(func):
        path = tmp_path / "k.co"
        path.write_bytes(hipcc_compile(hip_source(func, "gfx90a")[1], "gfx90a", _include_dir()))
        return subprocess.run([tool, "-d", str(path)], capture_output=True, text=True, check=True).stdout

    gemm = isa(CASES["gemm_bf16_3_stages_64x64"]())
    assert "v_mfma_f32_32x32x8bf16_1k" in gemm
    assert not re.search(r"v_(pk_)?fma", gemm)
    assert "global_load_dwordx4" in gemm and "ds_write_b128" in gemm and "s_barrier" in gemm
    assert "scratch_" not in gemm and "buffer_store_dword" not in gemm
    smx = isa(softmax(256, 512))
    assert re.search(r"ds_bpermute_b32|ds_swizzle_b32|row_shr|row_xmask|quad_perm|dpp", smx)


# ---------------------------------------------------------------------- matrix cores

MATRIX_CORE_CHOICES = [
    ("gfx90a", "gemm_fp16", "on MFMA v_mfma_f32_32x32x8f16, 1 x 2 wavefronts (as C^T = B^T A^T); "
                            "A from shared memory (8-byte LDS reads)"),
    ("gfx90a", "gemm_bf16_ragged", "on MFMA v_mfma_f32_32x32x8bf16_1k"),
    ("gfx90a", "gemm_int8_2_stages", "on MFMA v_mfma_i32_32x32x8i8"),
    ("gfx942", "gemm_bf16_ragged", "on MFMA v_mfma_f32_32x32x8_bf16"),
    ("gfx942", "gemm_int8_2_stages", "on MFMA v_mfma_i32_32x32x16_i8"),
    ("gfx950", "gemm_fp16", "on MFMA v_mfma_f32_32x32x8f16"),
    ("gfx942", "gemm_fp16_transposed_2_stages", "2 x 2 wavefronts (as C^T = B^T A^T); A from shared memory "
                                                "(2-byte LDS reads: stored K x M)"),
    ("gfx90a", "gemm_transposed", "on MFMA v_mfma_f32_32x32x2f32"),
    ("gfx942", "gemm_transposed", "on MFMA v_mfma_f32_32x32x2f32"),
    ("gfx1100", "gemm_fp16", "on WMMA v_wmma_f32_16x16x16_f16, 2 x 2 wavefronts; A from shared memory "
                             "(16-byte LDS reads)"),
    ("gfx1100", "gemm_int8_2_stages", "on WMMA v_wmma_i32_16x16x16_iu8"),
]


@pytest.mark.parametrize("arch, case, expected", MATRIX_CORE_CHOICES)
def test_matrix_core_instruction_per_architecture(arch, case, expected):
    lowered, source = hip_source(CASES[case](), arch)
    report = lowered.lowering_report()
    assert expected in report, report
    assert "slower path" not in report
    assert ("tl::wmma_" if arch == "gfx1100" else "tl::mfma_") in source


def test_attention_multiplies_p_from_registers_on_mfma():
    """P V takes P straight from the accumulator of Q K^T (MFMA's transposed product gives
    each lane the B input's layout); on RDNA 3 WMMA needs whole rows of A per lane, so both
    products stay SIMT, reported as slower."""
    lowered, source = hip_source(CASES["flash_attention_causal"](), "gfx942")
    gemms = [line for line in lowered.lowering_report().splitlines() if "T.gemm" in line]
    assert len(gemms) == 2
    assert "A from shared memory (8-byte LDS reads)" in gemms[0]
    assert "on MFMA v_mfma_f32_32x32x8f16" in gemms[1] and "A from registers" in gemms[1]
    assert "__shared__" in source and "P_shared" not in source
    report = hip_source(CASES["flash_attention_causal"](), "gfx1100")[0].lowering_report()
    assert "[slower path: not on the matrix cores: WMMA takes A from shared memory only" in report


def test_small_tiles_take_the_16x16_instructions():
    lowered, _ = hip_source(matmul(128, 128, 64, 32, 16, 32, in_dtype="float16", threads=64), "gfx942")
    assert "on MFMA v_mfma_f32_16x16x16f16, 1 x 1 wavefronts" in lowered.lowering_report()


@pytest.mark.parametrize("arch, why", [
    ("gfx942", "the block's thread count (32) is not whole wavefronts of 64"),
    ("gfx1201", "WMMA on RDNA 4 (gfx12's register layouts and __builtin_amdgcn_wmma_*_gfx12) is not generated yet"),
])
def test_matrix_cores_not_taken_say_why(arch, why):
    func = matmul(128, 128, 64, 32, 32, 32, in_dtype="float16", threads=32)
    report = hip_source(func, arch)[0].lowering_report()
    assert f"on SIMT multiply-adds ({why})" in report
    assert f"[slower path: not on the matrix cores: {why}]" in report
    with pytest.warns(tilelang.errors.TileLangPerformanceWarning, match="not on the matrix cores"):
        tilelang.compile(matmul(128, 128, 64, 32, 32, 32, in_dtype="float16", threads=32), target=f"hip -arch={arch}")


@pytest.mark.parametrize("arch, case, mnemonic", [("gfx90a", "gemm_fp16", "v_mfma_f32_32x32x8f16"),
                                                  ("gfx940", "gemm_fp16", "v_mfma_f32_32x32x8f16"),
                                                  ("gfx90a", "gemm_transposed", "v_mfma_f32_32x32x2f32"),
                                                  ("gfx1100", "gemm_fp16", "v_wmma_f32_16x16x16_f16")])
def test_isa_of_the_matrix_core_gemm(arch, case, mnemonic, tmp_path):
    """The machine code issues the instruction the report names and no FMA loop: a 64 x 32
    wavefront tile of a 32-deep K tile is two 32 x 32 tiles of 4 K steps (16-bit MFMA; 16
    steps of float32's x2f32) or four 16 x 16 tiles of 2 (WMMA), 8 (32) per K tile (times the
    K tiles the compiler unrolls), with
    no scratch. gfx1100's code is checked as assembly where the device libraries lack it
    (their unresolved calls spill around them, so scratch is not checked there)."""
    support, why = toolchain_support(arch)
    if support is None:
        pytest.skip(why)
    _, source = hip_source(CASES[case](), arch)
    if support == "assembly":
        asm = hipcc_compile(source, arch, _include_dir(), assembly=True).decode()
    else:
        tool = objdump()
        if tool is None:
            pytest.skip("llvm-objdump is not installed")
        path = tmp_path / "k.co"
        path.write_bytes(hipcc_compile(source, arch, _include_dir()))
        asm = subprocess.run([tool, "-d", str(path)], capture_output=True, text=True, check=True).stdout
    assert asm.count(mnemonic) >= 8 and asm.count(mnemonic) % 8 == 0, asm.count(mnemonic)
    if support == "object":
        assert "scratch_" not in asm and "buffer_store_dword" not in asm
    assert not re.search(r"v_(pk_)?fma_f32|v_fmac_f32", asm)


# ---------------------------------------------------------------------- launching

@pytest.fixture
def fake_hip_runtime(tmp_path, monkeypatch):
    """The HIP runtime replaced by tests/python/fake_hip_runtime.c (records launches)."""
    import ctypes
    import os
    support, why = toolchain_support("gfx90a")
    if support != "object":
        pytest.skip(why or "gfx90a code objects cannot be built here")
    lib = tmp_path / "libfake_amdhip64.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib),
                    os.path.join(os.path.dirname(__file__), "fake_hip_runtime.c")], check=True)
    monkeypatch.setenv("TILELANG_HIP_RUNTIME", str(lib))
    monkeypatch.setenv("FAKE_HIP_ARCH", "gfx90a")
    hip_runtime.cache_clear()
    hip_device_status.cache_clear()
    yield ctypes.CDLL(str(lib))  # the same loaded library: it shares the recorded launches
    hip_runtime.cache_clear()
    hip_device_status.cache_clear()


def _axpy(threads=128):
    """A kernel of its own per thread count (compiled kernels are cached in memory, loaded
    code objects with them)."""
    n = T.dynamic("n")

    @T.prim_func
    def axpy(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), a: T.float32, k: T.int32):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                if bx * threads + i < n:
                    Y[bx * threads + i] = X[bx * threads + i] * a + k
    return axpy


def test_launch_passes_pointers_scalars_and_shapes(fake_hip_runtime):
    """The launch through the runtime: the code object hipcc built for the target, the grid
    from the bound shape, the block, and each parameter in its C type in the order of the
    kernel's signature (buffers, scalars, then shape variables)."""
    import ctypes
    assert hip_device_status() == ""
    kernel = tilelang.compile(_axpy(), target="hip -arch=gfx90a")
    info = kernel._executable.infos[0]
    assert [(p[0], p[1]) for p in info["params"]] == [("buffer", "X"), ("buffer", "Y"), ("scalar", "a"),
                                                       ("scalar", "k"), ("shape", "n")]
    sizes = (ctypes.c_int * 5)(8, 8, 4, 4, 8)
    fake_hip_runtime.fake_expect_arg_sizes(5, sizes)
    kernel._executable.run({0: 0x10000, 1: 0x20000, 2: 1.5, 3: -7}, {"n": 1000}, 0x77)
    assert fake_hip_runtime.fake_launch_count() == 1
    fake_hip_runtime.fake_launched_name.restype = ctypes.c_char_p
    assert fake_hip_runtime.fake_launched_name().decode() == info["name"]
    dims = (ctypes.c_uint * 7)()
    fake_hip_runtime.fake_launch_dims(dims)
    assert list(dims) == [8, 1, 1, 128, 1, 1, 0]
    fake_hip_runtime.fake_launch_stream.restype = ctypes.c_void_p
    assert fake_hip_runtime.fake_launch_stream() == 0x77

    def arg(i, ctype):
        box = ctype()
        fake_hip_runtime.fake_launch_arg(i, ctypes.byref(box))
        return box.value

    assert (arg(0, ctypes.c_void_p), arg(1, ctypes.c_void_p)) == (0x10000, 0x20000)
    assert (arg(2, ctypes.c_float), arg(3, ctypes.c_int32), arg(4, ctypes.c_int64)) == (1.5, -7, 1000)
    # An empty input launches nothing; a misaligned buffer is refused before launching.
    kernel._executable.run({0: 0x10000, 1: 0x20000, 2: 1.5, 3: 0}, {"n": 0}, 0)
    assert fake_hip_runtime.fake_launch_count() == 1
    with pytest.raises(ValueError, match="argument 'Y' is not 16-byte aligned"):
        kernel._executable.run({0: 0x10000, 1: 0x20004, 2: 1.5, 3: 0}, {"n": 8}, 0)


def test_code_object_for_another_architecture_says_so(fake_hip_runtime, monkeypatch):
    monkeypatch.setenv("FAKE_HIP_ARCH", "gfx942")
    kernel = tilelang.compile(_axpy(64), target="hip -arch=gfx90a")
    with pytest.raises(TileLangUnsupportedError, match=r"the code object for gfx90a does not load on this AMD GPU "
                                                       r"\(hipModuleLoadData: hipErrorNoBinaryForGpu\)"):
        kernel._executable.run({0: 0x10000, 1: 0x20000, 2: 1.0, 3: 0}, {"n": 8}, 0)


def test_no_device_behind_the_runtime(fake_hip_runtime, monkeypatch):
    monkeypatch.setenv("FAKE_HIP_DEVICES", "0")
    hip_device_status.cache_clear()
    kernel = tilelang.compile(_axpy(), target="hip -arch=gfx90a")
    x = np.zeros(8, np.float32)
    with pytest.raises(TileLangUnsupportedError, match=r"no AMD GPU is present \(hipGetDeviceCount: "
                                                       r"hipErrorNoDevice\)"):
        kernel(x, np.empty_like(x), 1.0, 0)


# ---------------------------------------------------------------------- registers

def _per_thread_array(threads, floats):
    @T.prim_func
    def main(A: T.Tensor((threads * floats,), "float32")):
        with T.Kernel(1, threads=threads) as _:
            acc = T.alloc_local((floats,), "float32")
            tx = T.get_thread_binding()
            for k in T.serial(floats):
                acc[k] = A[tx * floats + k]
            for k in T.serial(floats):
                A[tx * floats + k] = acc[k] * 2.0
    return main


@pytest.mark.parametrize("arch, threads, report", [
    ("gfx90a", 256, None),  # 4 wavefronts, one a SIMD: 512 registers (2048 bytes) each
    ("gfx90a", 1024, "more than the 128 registers (512 bytes) a thread of a 1024-thread block has"),
    ("gfx1100", 256, "more than the 256 registers (1024 bytes) a thread of a 256-thread block has"),
])
def test_register_budget_per_architecture(arch, threads, report):
    lowered = _C.lower(_per_thread_array(threads, 300).handle, f"hip -arch={arch}")  # 1200 bytes a thread
    text = lowered.lowering_report()
    if report is None:
        assert "slower path: more than" not in text, text
    else:
        assert f"each thread holds 1200 bytes of arrays [slower path: {report}; the rest lives in scratch memory]" \
            in text, text
