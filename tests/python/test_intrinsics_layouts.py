"""tilelang.intrinsics' layout helpers (upstream's names): get_swizzle_layout places each
element of a tile with rows of 16-byte multiples by the 128-byte swizzle, a permutation of
the tile; make_mma_swizzle_layout asks for the compiler's swizzle of a shared tile. Results
never depend on them: a copy through a tile so laid out gives back its input."""
import itertools

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.intrinsics import get_swizzle_layout, make_mma_swizzle_layout


@pytest.mark.parametrize("rows, cols, dtype", [(16, 64, "float16"), (32, 32, "float16"), (8, 32, "float32"),
                                               (16, 128, "int8"), (64, 16, "float16")])
def test_get_swizzle_layout_is_a_permutation_of_the_tile(rows, cols, dtype):
    places = [get_swizzle_layout(i, j, cols, dtype) for i, j in itertools.product(range(rows), range(cols))]
    assert sorted(places) == list(itertools.product(range(rows), range(cols)))


def test_get_swizzle_layout_moves_16_byte_chunks_by_the_row():
    # float16 rows of 128 bytes: row r's chunk c lands in chunk c ^ (r % 8).
    assert [get_swizzle_layout(r, 0, 64, "float16") for r in range(9)] == [(r % 8 + r // 8 * 8, (r % 8) * 8)
                                                                          for r in range(9)]
    assert get_swizzle_layout(3, 13, 64, "float16") == (3, (1 ^ 3) * 8 + 5)
    with pytest.raises(ValueError, match="a multiple of 16 is needed"):
        get_swizzle_layout(0, 0, 4, "float16")


@pytest.mark.parametrize("smooth", [False, True])
def test_a_tile_laid_out_so_copies_unchanged(target, rng, smooth):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({S: make_mma_swizzle_layout(S, is_smooth=smooth)})
            T.copy(A, S)
            T.copy(S, B)

    kernel = tilelang.compile(main, out_idx=[1], target=target)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a)
