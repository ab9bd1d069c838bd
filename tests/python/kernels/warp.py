"""Thread-level warp primitives (language/warp.py) on a block of 128 threads."""
import tilelang.language as T

COLUMNS = 10  # what each thread writes, in order (test_warp_primitives.py checks each)


def warp_primitives(threads=128, dtype="float32"):
    """Out[t, :] for thread t (A[t] its value): the warp's sum, max and min of A, the lane
    and warp indices, the warpgroup index, the number of the warp's lanes with A > 0 (from
    the ballot), whether any / all of the warp's lanes have A > 2 / A > -10, and how many
    threads of the block have A > 0."""

    @T.prim_func
    def warp_ops(A: T.Tensor((threads,), dtype), Out: T.Tensor((threads, COLUMNS), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            v = A[tx]
            Out[tx, 0] = T.warp_reduce_sum(v)
            Out[tx, 1] = T.warp_reduce_max(v)
            Out[tx, 2] = T.warp_reduce_min(v)
            Out[tx, 3] = T.get_lane_idx()
            Out[tx, 4] = T.get_warp_idx()
            Out[tx, 5] = T.get_warp_group_idx()
            Out[tx, 6] = T.popcount(T.ballot_sync(v > 0))
            Out[tx, 7] = T.any_sync(v > 2) != 0
            Out[tx, 8] = T.all_sync(v > -10) != 0
            T.sync_warp()
            Out[tx, 9] = T.syncthreads_count(v > 0)

    return warp_ops
