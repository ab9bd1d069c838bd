"""Where shared buffers start. TMA and wgmma swizzle by the bits of the shared address (atoms
of 8 rows of up to 128 bytes), so every tile that may be swizzled starts on 1 KiB, also
those smaller than 1 KiB: a 4 x 32 float32 tile placed at 1536 was stored by TMA with the
swizzle of rows 4-7 while the threads had written it with that of rows 0-3 (every element
of the output wrong on the GPU). Row vectors keep 128-byte alignment."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

SM90 = "cuda -arch=sm_90a"


def staged_rows(rows, cols, dtype="float32", threads=64):
    """Out = X + 1, a few rows at a time through a small shared tile (stored by TMA on
    sm_90a); a small tile and a row vector are allocated before it."""

    @T.prim_func
    def main(X: T.Tensor((16, cols), dtype), Out: T.Tensor((16, cols), dtype)):
        with T.Kernel(1, threads=threads) as bx:
            first = T.alloc_shared((16, 16), "bfloat16")
            vector = T.alloc_shared((48,), "float32")
            part = T.alloc_shared((rows, cols), dtype)
            for i in T.Parallel(48):
                vector[i] = 1.0
            for i, j in T.Parallel(16, 16):
                first[i, j] = 0
            for s in range(16 // rows):
                for i, j in T.Parallel(rows, cols):
                    part[i, j] = X[s * rows + i, j] + vector[j % 48] + first[i, j % 16]
                T.copy(part, Out[s * rows:(s + 1) * rows, :])

    return main


def _offsets(source):
    return {name: int(at) for name, at in re.findall(r"\* (\w+) = reinterpret_cast<[^>]+>\(tl_dyn_smem \+ (\d+)\)", source)}


@pytest.mark.parametrize("rows,cols,dtype", [(4, 32, "float32"), (2, 64, "float16"), (4, 16, "float32"), (8, 32, "float32")])
def test_small_tiles_start_on_1_kib(rows, cols, dtype):
    lowered = _C.lower(staged_rows(rows, cols, dtype).handle, SM90)
    offsets = _offsets(_C.codegen(lowered, SM90))
    assert offsets["part"] % 1024 == 0 and offsets["first"] % 1024 == 0, offsets
    assert "by TMA store" in lowered.lowering_report()


def test_row_vectors_keep_128_bytes():
    offsets = _offsets(_C.codegen(_C.lower(staged_rows(4, 32).handle, SM90), SM90))
    assert offsets["vector"] % 128 == 0, offsets
    # The vector takes the room between the tiles rather than a kibibyte of its own.
    assert offsets["vector"] % 1024 != 0 or max(offsets.values()) <= 2048, offsets


@pytest.mark.parametrize("rows,cols", [(4, 32), (2, 64)])
def test_staged_rows_numerics(target, rows, cols):
    kernel = tilelang.compile(staged_rows(rows, cols), target=target)
    x = np.random.default_rng(5).standard_normal((16, cols)).astype(np.float32)
    out = np.full((16, cols), np.nan, np.float32)
    kernel(x, out)
    np.testing.assert_allclose(out, x + 1.0, rtol=1e-6, atol=1e-6)
