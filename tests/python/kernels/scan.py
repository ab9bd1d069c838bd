"""Inclusive prefix sums with T.cumsum."""

import tilelang.language as T


def cumsum_tile(M, N, dim, reverse=False, scope="fragment", block=16, dtype="float32", threads=128):
    """Y = cumsum(X, axis=dim), reversed when ``reverse``.

    Each block owns a tile spanning the whole scanned dimension (dim=1: block
    rows of N; dim=0: M rows of block columns).
    scope="fragment": T.cumsum(src_fragment, dst_fragment, ...);
    scope="shared":   T.cumsum(shared_tile, ...) in place (dst defaults to src).
    """
    assert dim in (0, 1)
    assert scope in ("fragment", "shared")
    tile = (block, N) if dim == 1 else (M, block)
    n_blocks = (M + block - 1) // block if dim == 1 else (N + block - 1) // block

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(n_blocks, threads=threads) as bx:
            row0 = bx * block if dim == 1 else 0
            col0 = 0 if dim == 1 else bx * block
            if scope == "shared":
                s = T.alloc_shared(tile, dtype)
                T.copy(X[row0, col0], s)
                T.cumsum(s, dim=dim, reverse=reverse)
                T.copy(s, Y[row0, col0])
            else:
                src = T.alloc_fragment(tile, dtype)
                dst = T.alloc_fragment(tile, dtype)
                T.copy(X[row0, col0], src)
                T.cumsum(src, dst, dim=dim, reverse=reverse)
                T.copy(dst, Y[row0, col0])

    return main
