"""T.im2col / T.c2d_im2col: a 2-D convolution as an implicit GEMM whose A tile is gathered
from a channels-last image, against numpy's convolution (padding, stride, dilation, a
partial last block of output pixels, a reduction length that is not a multiple of the tile)."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangShapeError, TileLangTypeError


def conv2d(N, C, H, W, F, K, S, D, P, block_M=64, block_N=32, block_K=32, spelling="im2col"):
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    gather = getattr(T, spelling)

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float32"), kernel: T.Tensor((K * K * C, F), "float32"),
             out: T.Tensor((N * OH * OW, F), "float32")):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float32")
            B_s = T.alloc_shared((block_K, block_N), "float32")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k_iter in T.Pipelined(T.ceildiv(K * K * C, block_K), num_stages=2):
                gather(data, A_s, by, k_iter, K, S, D, P)
                T.copy(kernel[k_iter * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, out[by * block_M, bx * block_N])

    return main, OH, OW


def reference(x, w, K, S, D, P):
    N, H, W, C = x.shape
    F = w.shape[-1]
    xp = np.pad(x, ((0, 0), (P, P), (P, P), (0, 0))).astype(np.float64)
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    out = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            patch = xp[:, kh * D:kh * D + S * (OH - 1) + 1:S, kw * D:kw * D + S * (OW - 1) + 1:S, :]
            out += patch @ w[kh, kw].astype(np.float64)
    return out.reshape(N * OH * OW, F)


@pytest.mark.parametrize("N, C, H, W, F, K, S, D, P, spelling", [
    (2, 16, 8, 8, 32, 3, 1, 1, 1, "im2col"),      # 128 pixels, 144 = 4.5 tiles of reduction
    (1, 8, 9, 7, 32, 3, 2, 2, 2, "c2d_im2col"),   # stride and dilation, a partial block of pixels
    (3, 4, 5, 5, 64, 1, 1, 1, 0, "im2col"),       # a 1 x 1 convolution: a plain GEMM
])
def test_convolution_through_im2col(target, N, C, H, W, F, K, S, D, P, spelling):
    fn, OH, OW = conv2d(N, C, H, W, F, K, S, D, P, spelling=spelling)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((N, H, W, C)).astype(np.float32)
    w = rng.standard_normal((K, K, C, F)).astype(np.float32)
    out = np.zeros((N * OH * OW, F), np.float32)
    tilelang.compile(fn, target=target)(x, w.reshape(K * K * C, F), out)
    np.testing.assert_allclose(out, reference(x, w, K, S, D, P), rtol=1e-4, atol=1e-4)


def test_im2col_on_hopper_says_it_is_not_the_tma_mode():
    fn, _, _ = conv2d(2, 16, 8, 8, 32, 3, 1, 1, 1)
    report = _C.lower(fn.handle, "cuda -arch=sm_90a").lowering_report()
    assert "T.im2col gathered into the tile by the threads [slower path: TMA's im2col mode is not used" in report
    assert "T.im2col gathered" not in _C.lower(fn.handle, "cuda -arch=sm_80").lowering_report()


def test_im2col_checks_its_arguments():
    with pytest.raises(TileLangShapeError, match=r"T\.im2col: the image 'x' has shape \[8, 8\]; it must be "
                                                 r"\(N, H, W, C\)"):
        @T.prim_func
        def flat(x: T.Tensor((8, 8), "float32")):
            with T.Kernel(1, threads=32):
                A_s = T.alloc_shared((16, 16), "float32")
                T.im2col(x, A_s, 0, 0, 3, 1, 1, 1)

    with pytest.raises(TileLangTypeError, match=r"T\.im2col: stride must be a Python int, got 1\.5"):
        @T.prim_func
        def odd(x: T.Tensor((1, 8, 8, 4), "float32")):
            with T.Kernel(1, threads=32):
                A_s = T.alloc_shared((16, 16), "float32")
                T.im2col(x, A_s, 0, 0, 3, 1.5, 1, 1)
