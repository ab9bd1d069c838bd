"""Target hip's generated kernels, run through a host emulation (tests/python/hip_emulation)
and compared with numpy: the MFMA (CDNA) and WMMA (RDNA 3) products of T.gemm, attention's
P V with P taken from the registers of Q K^T, and the softmax's wavefront shuffles.

The emulation compiles the HIP source with g++ and runs each block's threads as host threads;
the matrix-core builtins are computed from AMD's documented register layouts (written out in
hip_emulation/include/tl_emu/matrix_cores.h, independently of the compiler's layout code), so
a wrong operand or accumulator layout in the lowering gives wrong numbers here. It says
nothing about timing, or about what the hardware does beyond its documentation."""
import numpy as np
import pytest


from hip_emulation import BFLOAT16, EmulatedKernel, toolchain_problem
from kernels.attention import flash_attention_fwd
from kernels.gemm import matmul
from kernels.softmax import softmax
from test_cuda_compile import CASES as CUDA_CASES

pytestmark = pytest.mark.skipif(toolchain_problem() is not None, reason=str(toolchain_problem()))

RNG_SEED = 20240611


def operand(shape, dtype, rng):
    if dtype == "int8":
        return rng.integers(-128, 128, size=shape, dtype=np.int8)
    values = rng.standard_normal(shape)
    if dtype == "float16":
        return values.astype(np.float16)
    if dtype == "float32":
        return values.astype(np.float32)
    if BFLOAT16 is None:
        pytest.skip("ml_dtypes is not installed: no numpy bfloat16")
    return values.astype(BFLOAT16)


def gemm_line(kernel):
    lines = [line for line in kernel.report.splitlines() if "T.gemm" in line]
    assert len(lines) == 1, kernel.report
    return lines[0]


def run_gemm(func, arch, M, N, K, in_dtype, out_dtype, transpose_A=False, transpose_B=False):
    """Runs C = A B through the emulation; returns the kernel, C and the float64 product."""
    rng = np.random.default_rng(RNG_SEED)
    kernel = EmulatedKernel(func, arch)
    A, B = operand((M, K), in_dtype, rng), operand((K, N), in_dtype, rng)
    C = np.full((M, N), -12345, dtype=np.dtype(out_dtype))  # anything not written shows
    kernel(np.ascontiguousarray(A.T) if transpose_A else A, np.ascontiguousarray(B.T) if transpose_B else B, C)
    return kernel, C, A.astype(np.float64) @ B.astype(np.float64)


def check_product(C, ref, out_dtype):
    if out_dtype == "int32":
        np.testing.assert_array_equal(C, ref.astype(np.int64))
    elif out_dtype == "float16":  # one rounding to float16 of a float32 sum
        np.testing.assert_allclose(C.astype(np.float64), ref, rtol=2e-3, atol=2e-2)
    else:  # float16 / bfloat16 products are exact in float32 (float32 ones round once); the sum's order differs
        np.testing.assert_allclose(C, ref, rtol=1e-4, atol=1e-3)


# (id, arch, matmul arguments, what the report's T.gemm line must say)
MATRIX_CORE_GEMMS = [
    ("fp16_32x32", "gfx90a", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="float16"),
     "on MFMA v_mfma_f32_32x32x8f16, 1 x 2 wavefronts"),
    ("bf16_32x32", "gfx90a", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="bfloat16"),
     "on MFMA v_mfma_f32_32x32x8bf16_1k, 1 x 2 wavefronts"),
    ("fp16_16x16", "gfx90a", dict(M=128, N=128, K=64, block_M=32, block_N=16, block_K=32, in_dtype="float16",
                                  threads=64), "on MFMA v_mfma_f32_16x16x16f16, 1 x 1 wavefronts"),
    ("bf16_16x16", "gfx90a", dict(M=128, N=128, K=64, block_M=32, block_N=16, block_K=32, in_dtype="bfloat16",
                                  threads=64), "on MFMA v_mfma_f32_16x16x16bf16_1k, 1 x 1 wavefronts"),
    ("fp16_transposed_A", "gfx90a", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="float16",
                                         transpose_A=True), "A from shared memory (2-byte LDS reads: stored K x M)"),
    ("fp16_transposed_B", "gfx90a", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="float16",
                                         transpose_B=True), "B from shared memory (8-byte LDS reads)"),
    ("fp16_transposed_AB_4_waves", "gfx90a", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32,
                                                  in_dtype="float16", transpose_A=True, transpose_B=True,
                                                  threads=256),
     "on MFMA v_mfma_f32_32x32x8f16, 2 x 2 wavefronts"),
    ("bf16_3_stages", "gfx90a", dict(M=128, N=128, K=128, block_M=64, block_N=64, block_K=32, in_dtype="bfloat16",
                                     num_stages=3), "on MFMA v_mfma_f32_32x32x8bf16_1k"),
    ("bf16_gfx940", "gfx940", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="bfloat16"),
     "on MFMA v_mfma_f32_32x32x8_bf16"),
    ("int8_gfx90a", "gfx90a", dict(M=128, N=128, K=128, block_M=64, block_N=64, block_K=64, in_dtype="int8",
                                   out_dtype="int32", accum_dtype="int32", transpose_B=True),
     "on MFMA v_mfma_i32_32x32x8i8"),
    ("int8_gfx90a_B_KxN", "gfx90a", dict(M=128, N=128, K=128, block_M=64, block_N=64, block_K=64, in_dtype="int8",
                                         out_dtype="int32", accum_dtype="int32"), "on MFMA v_mfma_i32_32x32x8i8"),
    ("int8_gfx90a_16x16", "gfx90a", dict(M=128, N=128, K=128, block_M=32, block_N=16, block_K=64, in_dtype="int8",
                                         out_dtype="int32", accum_dtype="int32", transpose_B=True, threads=64),
     "on MFMA v_mfma_i32_16x16x16i8"),
    ("int8_gfx940", "gfx940", dict(M=128, N=128, K=128, block_M=64, block_N=64, block_K=64, in_dtype="int8",
                                   out_dtype="int32", accum_dtype="int32", transpose_B=True),
     "on MFMA v_mfma_i32_32x32x16_i8"),
    ("int8_gfx940_16x16", "gfx940", dict(M=128, N=128, K=128, block_M=32, block_N=16, block_K=64, in_dtype="int8",
                                         out_dtype="int32", accum_dtype="int32", transpose_B=True, threads=64),
     "on MFMA v_mfma_i32_16x16x32_i8"),
    ("fp32_32x32", "gfx90a", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="float32"),
     "on MFMA v_mfma_f32_32x32x2f32, 1 x 2 wavefronts"),
    ("fp32_16x16_transposed_B_gfx940", "gfx940", dict(M=128, N=128, K=64, block_M=32, block_N=16, block_K=32,
                                                      in_dtype="float32", transpose_B=True, threads=64),
     "on MFMA v_mfma_f32_16x16x4f32, 1 x 1 wavefronts"),
    ("wmma_fp16", "gfx1100", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="float16"),
     "on WMMA v_wmma_f32_16x16x16_f16, 2 x 2 wavefronts"),
    ("wmma_bf16", "gfx1100", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32, in_dtype="bfloat16"),
     "on WMMA v_wmma_f32_16x16x16_bf16, 2 x 2 wavefronts"),
    ("wmma_int8", "gfx1100", dict(M=128, N=128, K=128, block_M=64, block_N=64, block_K=64, in_dtype="int8",
                                  out_dtype="int32", accum_dtype="int32", transpose_B=True),
     "on WMMA v_wmma_i32_16x16x16_iu8"),
    ("wmma_fp16_transposed_A", "gfx1100", dict(M=128, N=128, K=64, block_M=64, block_N=64, block_K=32,
                                               in_dtype="float16", transpose_A=True),
     "on WMMA v_wmma_f32_16x16x16_f16"),
]


@pytest.mark.parametrize("arch, args, expected", [case[1:] for case in MATRIX_CORE_GEMMS],
                         ids=[case[0] for case in MATRIX_CORE_GEMMS])
def test_matrix_core_gemm(arch, args, expected):
    args = dict(args)
    M, N, K = args.pop("M"), args.pop("N"), args.pop("K")
    out_dtype = args.setdefault("out_dtype", "float32")
    kernel, C, ref = run_gemm(matmul(M, N, K, **args), arch, M, N, K, args["in_dtype"], out_dtype,
                              args.get("transpose_A", False), args.get("transpose_B", False))
    line = gemm_line(kernel)
    assert expected in line and "SIMT" not in line, line
    if args.get("num_stages", 2) == 3:
        assert "pipelined: 2 copies ahead into 3 buffers of A_shared B_shared" in kernel.report, kernel.report
    check_product(C, ref, out_dtype)


# test_cuda_compile's cases: their shapes and dtypes.
SUITE_GEMMS = {"gemm_bf16_ragged": ((200, 136, 72), "bfloat16", "float32"),
               "gemm_fp16": ((256, 256, 128), "float16", "float16")}


@pytest.mark.parametrize("case, arch, expected", [
    ("gemm_bf16_ragged", "gfx90a", "on MFMA v_mfma_f32_32x32x8bf16_1k"),  # 200 x 136 x 72: tails in M, N and K
    ("gemm_bf16_ragged", "gfx1100", "on WMMA v_wmma_f32_16x16x16_bf16"),
    ("gemm_fp16", "gfx90a", "on MFMA v_mfma_f32_32x32x8f16"),  # float16 out: the accumulators converted on store
])
def test_suite_gemm(case, arch, expected):
    (M, N, K), in_dtype, out_dtype = SUITE_GEMMS[case]
    kernel, C, ref = run_gemm(CUDA_CASES[case](), arch, M, N, K, in_dtype, out_dtype)
    assert expected in gemm_line(kernel)
    check_product(C, ref, out_dtype)


def attention_reference(Q, K, V, causal):
    q, k, v = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (Q, K, V))  # (batch, heads, seq, dim)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[2]
        scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("make, shape, instruction", [
    (CUDA_CASES["flash_attention_causal"], (1, 128, 2, 64), "v_mfma_f32_32x32x8f16"),
    (lambda: flash_attention_fwd(1, 1, 64, 64, True, block_M=32, block_N=16, threads=64), (1, 64, 1, 64),
     "v_mfma_f32_16x16x16f16"),
], ids=["suite_case_32x32", "16x16"])
def test_causal_flash_attention_on_mfma(make, shape, instruction):
    """Q K^T on MFMA from LDS, then P V with P straight from the first product's accumulators
    (converted to float16 in registers): the accumulator layout must be the A operand's."""
    kernel = EmulatedKernel(make(), "gfx90a")
    gemms = [line for line in kernel.report.splitlines() if "T.gemm" in line]
    assert len(gemms) == 2, kernel.report
    assert f"on MFMA {instruction}" in gemms[0] and "A from shared memory" in gemms[0]
    assert f"on MFMA {instruction}" in gemms[1] and "A from registers" in gemms[1]
    rng = np.random.default_rng(RNG_SEED)
    Q, K, V = (rng.standard_normal(shape).astype(np.float16) for _ in range(3))
    out = np.full_like(Q, np.nan)
    kernel(Q, K, V, out)
    # P is rounded to float16 before P V, the output to float16 at the end.
    np.testing.assert_allclose(out.astype(np.float64), attention_reference(Q, K, V, causal=True), rtol=1e-2,
                               atol=3e-3)


@pytest.mark.parametrize("arch, wave", [("gfx90a", 64), ("gfx1100", 32)])
def test_softmax_shuffles_over_the_wavefront(arch, wave):
    kernel = EmulatedKernel(softmax(256, 512), arch)
    assert f"tl::shfl_xor(row_max_red, 16, {wave})" in kernel.source
    rng = np.random.default_rng(RNG_SEED)
    X = (rng.standard_normal((256, 512)) * 4).astype(np.float32)
    Y = np.full_like(X, np.nan)
    kernel(X, Y)
    x = X.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(Y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


# LDS is counted at each type's size (it once was counted as WebGPU's 32-bit words, which
# refused these 64 KiB of bfloat16 and 32 KiB of int8 tiles as 128 KiB).
@pytest.mark.parametrize("in_dtype", ["bfloat16", "int8"])
def test_tiles_that_fit_the_lds_are_accepted(in_dtype):
    out_dtype = "int32" if in_dtype == "int8" else "float32"
    func = matmul(128, 128, 128, 128, 128, 64, in_dtype=in_dtype, out_dtype=out_dtype, accum_dtype=out_dtype,
                  threads=256)  # 2 stages of a 128 x 64 and a 64 x 128 tile
    kernel, C, ref = run_gemm(func, "gfx90a", 128, 128, 128, in_dtype, out_dtype)
    assert kernel.infos[0]["dynamic_shared_bytes"] == 2 * 2 * 128 * 64 * (1 if in_dtype == "int8" else 2)
    check_product(C, ref, out_dtype)
