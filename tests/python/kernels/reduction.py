"""Tile reductions: T.reduce_sum / max / min / abssum / absmax along one dim."""

import tilelang.language as T

REDUCE_OPS = ("sum", "max", "min", "abssum", "absmax")


def reduce_tile(M, N, op, dim, clear=True, block=16, dtype="float32", threads=128):
    """Reduce X (M, N) along ``dim`` into Out.

    dim=1: Out has M entries; each block owns ``block`` full rows.
    dim=0: Out has N entries; each block owns ``block`` full columns.
    With clear=False the reduction is combined into the values already in the
    destination tile, which are loaded from Init first.
    (T.reduce_abssum takes no ``clear`` argument in TileLang; it always clears.)
    """
    assert op in REDUCE_OPS
    assert dim in (0, 1)
    out_len = M if dim == 1 else N
    tile = (block, N) if dim == 1 else (M, block)

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dtype),
        Init: T.Tensor((out_len,), dtype),
        Out: T.Tensor((out_len,), dtype),
    ):
        with T.Kernel(T.ceildiv(out_len, block), threads=threads) as bx:
            x = T.alloc_fragment(tile, dtype)
            r = T.alloc_fragment((block,), dtype)

            if dim == 1:
                T.copy(X[bx * block, 0], x)
            else:
                T.copy(X[0, bx * block], x)
            if not clear:
                T.copy(Init[bx * block], r)

            if op == "sum":
                T.reduce_sum(x, r, dim=dim, clear=clear)
            elif op == "max":
                T.reduce_max(x, r, dim=dim, clear=clear)
            elif op == "min":
                T.reduce_min(x, r, dim=dim, clear=clear)
            elif op == "abssum":
                T.reduce_abssum(x, r, dim=dim)
            else:
                T.reduce_absmax(x, r, dim=dim, clear=clear)

            T.copy(r, Out[bx * block])

    return main
