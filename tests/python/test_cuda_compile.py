"""CUDA code generation without a GPU: the suite's kernels are lowered for CUDA, turned into
CUDA C++ and compiled by NVRTC and by nvcc for sm_80 and sm_90a, so CI checks the GPU path
on every change; the GEMM's machine code is read back for its tensor-core instructions.
Running the kernels is the GPU suite's job (TILELANG_TEST_TARGETS=cuda)."""
import pytest

import tilelang
from tilelang import _C
from tilelang.jit.kernel import _include_dir
from sass import nvrtc_reason, sass_of

from kernels.atomic import atomic_add_lanes, atomic_row_sum, atomic_total_sum, splitk_matmul
from kernels.attention import flash_attention_fwd
from kernels.dynamic import scale_shift
from kernels.elementwise import add_broadcast_guarded, add_broadcast_tiled
from kernels.gemm import matmul
from kernels.norm import rms_norm
from kernels.reduction import reduce_tile
from kernels.scan import cumsum_tile
from kernels.softmax import softmax
from kernels.transpose import transpose
from kernels.warp import warp_primitives

CASES = {
    "elementwise_guarded": lambda: add_broadcast_guarded(1000, 300),
    "elementwise_tiled_fp16": lambda: add_broadcast_tiled(1000, 300, dtype="float16"),
    "gemm_fp16": lambda: matmul(256, 256, 128, in_dtype="float16", out_dtype="float16"),
    "gemm_bf16_mma_3_stages": lambda: matmul(512, 512, 256, 128, 128, 32, in_dtype="bfloat16", num_stages=3),
    "gemm_fp16_mma_transposed_4_stages": lambda: matmul(256, 256, 256, 64, 128, 64, in_dtype="float16",
                                                        transpose_A=True, transpose_B=True, num_stages=4,
                                                        threads=256),
    "gemm_block_swizzle": lambda: matmul(512, 384, 128, 128, 128, 32, in_dtype="float16", swizzle_panel=3),
    "gemm_int8_mma": lambda: matmul(256, 256, 256, 128, 128, 64, in_dtype="int8", out_dtype="int32",
                                    accum_dtype="int32", transpose_B=True, num_stages=3),
    "gemm_fp8_e4m3_mma": lambda: matmul(256, 256, 256, 128, 128, 64, in_dtype="float8_e4m3",
                                        transpose_B=True, num_stages=3),
    "flash_attention_mma_pipelined": lambda: flash_attention_fwd(1, 2, 256, 128, False, num_stages=2),
    "gemm_bf16_ragged": lambda: matmul(200, 136, 72, in_dtype="bfloat16"),
    "gemm_fp16_mma_narrow_warp_tiles": lambda: matmul(32, 128, 64, 16, 64, 32, in_dtype="float16", threads=256),
    "gemm_transposed": lambda: matmul(128, 128, 64, transpose_A=True, transpose_B=True),
    "splitk_atomic": lambda: splitk_matmul(128, 96, 256),
    "softmax": lambda: softmax(256, 512),
    "rmsnorm_fp16": lambda: rms_norm(256, 512, dtype="float16"),
    "reduce_rows": lambda: reduce_tile(128, 64, "max", 1),
    "reduce_cols": lambda: reduce_tile(128, 64, "sum", 0, clear=False),
    "reduce_whole_tile": lambda: atomic_total_sum(1000),
    "row_atomics": lambda: atomic_row_sum(100, 70),
    "cumsum_fragment": lambda: cumsum_tile(64, 32, 1, reverse=True),
    "cumsum_shared": lambda: cumsum_tile(64, 32, 0, scope="shared"),
    "transpose_shared": lambda: transpose(100, 70),
    "dynamic_shape": lambda: scale_shift(64),
    "flash_attention_causal": lambda: flash_attention_fwd(1, 2, 128, 64, True),
    "flash_attention_fp32_ragged": lambda: flash_attention_fwd(1, 2, 100, 64, False, dtype="float32"),
    "warp_primitives": lambda: warp_primitives(),
    "warp_primitives_fp16": lambda: warp_primitives(dtype="float16"),
}


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_source_compiles(case, arch, compiler):
    reason = nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    if compiler == "nvcc" and not _C.nvcc_available():
        pytest.skip("nvcc is not installed (the CUDA toolkit's bin directory is not on the search path)")
    func = CASES[case]()
    target = f"cuda -arch={arch}"
    lowered = _C.lower(func.handle, target)
    source = _C.codegen(lowered, target)
    assert "__global__" in source and "T.Parallel" not in lowered.script()
    compile_cubin = _C.nvrtc_compile if compiler == "nvrtc" else _C.nvcc_compile
    cubin = compile_cubin(source, f"{case}.cu", arch, [_include_dir()])
    assert cubin[:4] == b"\x7fELF"
    infos = _C.cuda_kernel_infos(lowered)
    assert infos and all(i["block"][0] >= 1 for i in infos)


def test_thread_level_ir_of_a_gemm():
    """The GEMM's fragments became per-thread arrays, and the K loop has its barriers."""
    text = tilelang.lower(matmul(128, 128, 64, in_dtype="float16"), target="cuda -arch=sm_90a")
    assert 'T.alloc_fragment' not in text and 'T.alloc_local' in text
    assert text.count("T.sync_threads()") == 2


def test_gemm_sass_uses_tensor_cores():
    """The bf16 GEMM's machine code multiplies on the tensor cores (HMMA), loads its operands
    with ldmatrix (LDSM) from shared memory filled by cp.async (LDGSTS), and keeps its
    accumulators in registers (no local-memory traffic); the int8 GEMM uses IMMA."""
    # The mma.sync path with cp.async (test_hopper.py reads the wgmma and TMA path's).
    mma = ["tl.disable_wgmma", "tl.disable_tma_lower"]
    sass, usage, _ = sass_of(matmul(1024, 1024, 1024, 128, 128, 32, in_dtype="bfloat16", num_stages=3), mma)
    # Per K step of 32: 2 slices x 4 x 8 m16n8k16 products per warp, 2 x (4 + 4) ldmatrix.x4.
    assert sass.count("HMMA.16816.F32.BF16") == 64, sass.count("HMMA")
    assert sass.count("LDSM.16.M88.4") == 8 and sass.count("LDSM.16.MT88.4") == 8
    assert "LDGSTS" in sass
    assert "LDL" not in sass and "STL" not in sass
    assert "LOCAL:0" in usage
    sass, _, _ = sass_of(matmul(256, 256, 256, 128, 128, 64, in_dtype="int8", out_dtype="int32", accum_dtype="int32",
                                transpose_B=True, num_stages=3), mma)
    assert "IMMA.16832.S8.S8" in sass and "LDSM.16.M88.4" in sass


def test_narrow_warp_tiles_load_an_odd_block_of_b_alone():
    """16 x 24 on one warp: three 16 x 8 accumulators per K step of 16, B's first two
    blocks by one ldmatrix.x4 (.trans: B is K x N) and the third by an ldmatrix.x2."""
    mma = ["tl.disable_wgmma", "tl.disable_tma_lower"]
    sass, usage, _ = sass_of(matmul(32, 48, 32, 16, 24, 32, in_dtype="float16", threads=32, num_stages=1), mma)
    assert sass.count("HMMA.16816.F32") == 6, sass.count("HMMA")  # 2 K slices x 3 blocks
    assert sass.count("LDSM.16.MT88.4") == 2 and sass.count("LDSM.16.MT88.2") == 2
    assert "LDL" not in sass and "STL" not in sass


def test_atomic_add_lanes_are_vector_atomics():
    """T.atomic_addx4 / x2 on float32 are one REDG of 4 / 2 floats on sm_90 (an atomic per
    element only where the address is misaligned); float16 pairs one F16x2 atomic; on sm_80
    float32 lanes stay scalar (its vector atomics are 16-bit pairs only)."""
    for lanes in (4, 2):
        sass, _, _ = sass_of(atomic_add_lanes(16, 32, lanes))
        assert f"REDG.E.ADD.F32x{lanes}." in sass, sass
    sass, _, _ = sass_of(atomic_add_lanes(16, 32, 2, dtype="float16"))
    assert "ATOM.E.ADD.F16x2" in sass
    sass, _, _ = sass_of(atomic_add_lanes(16, 32, 4), arch="sm_80")
    assert "F32x" not in sass and "RED.E.ADD.F32" in sass
    # The tile form: a thread's 4 consecutive accumulators of a float32 split-K tile are one
    # vector atomic; a ragged tile, guarded element by element, stays scalar.
    sass, _, _ = sass_of(splitk_matmul(128, 128, 256))
    assert "REDG.E.ADD.F32x4." in sass
    sass, _, _ = sass_of(splitk_matmul(100, 72, 256))
    assert "F32x" not in sass and "REDG.E.ADD.F32." in sass


def test_lowering_report_names_the_decisions():
    """The report says which instruction each T.gemm runs on, and why not the tensor cores."""
    report = _C.lower(flash_attention_fwd(1, 2, 256, 128, False, num_stages=2).handle,
                      "cuda -arch=sm_80").lowering_report()
    lines = report.splitlines()
    assert len(lines) == 3, report
    assert "attention.py" in lines[0] and "T.Pipelined(num_stages=2) pipelined" in lines[0]
    assert "K_shared V_shared" in lines[0]
    assert "mma.sync m16n8k16, 4 x 1 warps; A from shared memory (ldmatrix)" in lines[1]
    assert "A from registers" in lines[2]
    simt = _C.lower(matmul(128, 128, 64).handle, "cuda -arch=sm_80").lowering_report()
    assert "SIMT multiply-adds (tensor cores take float16/bfloat16/float8 inputs into float32" in simt
    old = _C.lower(matmul(128, 128, 64, in_dtype="float16").handle, "cuda -arch=sm_75").lowering_report()
    assert "mma.sync needs sm_80 or newer" in old and "cp.async needs sm_80" in old


def test_shared_memory_reuse_after_the_pipeline():
    """The epilogue's shared tile takes the bytes of the pipelined operand tiles, with one
    barrier between the K loop and its first write, and none inside the loop beyond the
    pipeline's own."""
    func = matmul(256, 256, 256, 128, 128, 32, in_dtype="float16", out_dtype="float16", num_stages=3,
                  epilogue_shared=True)
    # The cp.async pipeline (sm_80): its operand tiles' bytes are free once the loop is over.
    lowered = _C.lower(func.handle, "cuda -arch=sm_80")
    assert "shared memory 49152 bytes (81920 without reuse" in lowered.lowering_report()
    source = _C.codegen(lowered, "cuda -arch=sm_80")
    assert "C_shared = reinterpret_cast<__half*>(tl_dyn_smem + 0)" in source
    loop = source.index("for (int32_t k = 0")
    after_loop = source.index("C_shared[", loop)
    between = source[loop:after_loop]
    # The pipeline's barrier in the loop, then the one that guards the reuse.
    assert between.count("__syncthreads()") == 2


def test_fast_math_pass_config_reaches_the_compiler():
    """NVRTC's fast-math flag (what tl.enable_fast_math sets in the CUDA back end's build)
    gives approximate division (no slow-path call); off by default, as upstream."""
    import tilelang.language as T

    @T.prim_func
    def div(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32"), C: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                C[bx * 128 + i] = A[bx * 128 + i] / B[bx * 128 + i]

    exact, _, _ = sass_of(div)
    fast, _, _ = sass_of(div, fast_math=True)
    assert "CALL" in exact and "CALL" not in fast and "MUFU.RCP" in fast
