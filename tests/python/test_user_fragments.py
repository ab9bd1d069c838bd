"""T.annotate_layout({frag: T.Fragment(...)}): a fragment's thread mapping given by hand.
The compiler takes it as given (kernel_layouts reads back the mapping it used), results stay
numpy's on every target, an instruction that needs another mapping is a layout conflict,
and a table that is not a split of the indices into thread and slot digits is refused."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangLayoutError, TileLangShapeError
from tilelang.layout.maps import fragment_digits
from tilelang.tools import kernel_layouts

from kernels.gemm import matmul

# Rows dealt to threads four apart (thread = (i % 4) * 32 + j), each thread keeping every
# fourth row in its slots: not the default grid (which keeps a row's 32 columns in lanes
# of one warp and rows in consecutive warps' slots).
ROWS_BY_FOUR = dict(forward_thread_fn=lambda i, j: (i % 4) * 32 + j, forward_index_fn=lambda i, j: i // 4)


def scale_rows(fragment_of, threads=128, shape=(16, 32), reduce_rows=True):
    M, N = shape

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.annotate_layout({F: fragment_of(F)})
            T.copy(A, F)
            for i, j in T.Parallel(M, N):
                F[i, j] = F[i, j] * 3.0 + 1.0
            if reduce_rows:
                T.reduce_sum(F, s, dim=1)
            else:  # the sums of a copy through shared memory, in a fragment of the compiler's choosing
                S_shared = T.alloc_shared((M, N), "float32")
                G = T.alloc_fragment((M, N), "float32")
                T.copy(F, S_shared)
                T.copy(S_shared, G)
                T.reduce_sum(G, s, dim=1)
            T.copy(F, B)
            T.copy(s, S)

    return main


def _check(kernel_fn, target, shape=(16, 32)):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    b = np.zeros(shape, np.float32)
    s = np.zeros(shape[0], np.float32)
    tilelang.compile(kernel_fn, target=target)(a, b, s)
    np.testing.assert_allclose(b, a * 3 + 1, rtol=1e-6, atol=1e-6)  # a fused multiply-add rounds once
    np.testing.assert_allclose(s, (a * 3 + 1).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_given_mapping_computes_numpys_results(target):
    _check(scale_rows(lambda F: T.Fragment(F.shape, **ROWS_BY_FOUR)), target)


def test_the_compiler_uses_the_given_mapping():
    fn = scale_rows(lambda F: T.Fragment(F.shape, **ROWS_BY_FOUR))
    used = kernel_layouts(fn, "cuda -arch=sm_80")["F"]
    i, j = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    np.testing.assert_array_equal(used.threads_of()[0], (i % 4) * 32 + j)
    np.testing.assert_array_equal(used.slots_of(), i // 4)
    assert used.partition.startswith("given(")


def test_default_mapping_differs():
    @T.prim_func
    def plain(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((16, 32), "float32")
            T.copy(A, F)
            T.copy(F, B)

    chosen = kernel_layouts(plain, "cuda -arch=sm_80")["F"]
    i, j = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    assert not np.array_equal(chosen.threads_of()[0], (i % 4) * 32 + j)


def test_fragment_on_fewer_threads_than_the_block(target):
    """64 of 128 threads hold the tile: the others hold copies, and the stores run once."""
    frag = lambda F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: (i % 2) * 32 + j,  # noqa: E731
                                forward_index_fn=lambda i, j: i // 2)
    _check(scale_rows(frag, reduce_rows=False), target)
    used = kernel_layouts(scale_rows(frag, reduce_rows=False), "cuda -arch=sm_80")["F"]
    assert used.replicate_size == 2
    i, j = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    assert sorted({int(t) for t in used.threads_of()[1].ravel()}) == list(range(64, 128))
    np.testing.assert_array_equal(used.threads_of()[0], (i % 2) * 32 + j)


def test_replicated_fragment(target):
    """replicate=2: each element in two threads 64 apart (upstream's copies)."""
    M = 64

    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((M,), "float32")
            T.annotate_layout({F: T.Fragment(F.shape, forward_thread_fn=lambda i, rep: i + 64 * rep,
                                             forward_index_fn=lambda i: 0, replicate=2)})
            T.copy(A, F)
            for i in T.Parallel(M):
                F[i] = F[i] - 2.0
            T.copy(F, B)

    a = np.arange(M, dtype=np.float32)
    b = np.zeros(M, np.float32)
    tilelang.compile(main, target=target)(a, b)
    np.testing.assert_array_equal(b, a - 2)
    if target == "cpu":
        used = kernel_layouts(main, "cuda -arch=sm_80")["F"]
        np.testing.assert_array_equal(used.threads_of(), np.stack([np.arange(M), np.arange(M) + 64]))


def test_the_compilers_own_accumulator_mapping_is_accepted():
    """The mma accumulator's table, given back by hand, is the same partition: no conflict."""
    fn = matmul(64, 64, 64, 64, 64, 32, in_dtype="float16", threads=128)
    acc = kernel_layouts(fn, "cuda -arch=sm_80")["C_local"]
    thread, slot = acc.threads_of(), acc.slots_of()

    @T.prim_func
    def gemm(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C_local: T.Fragment.from_table(thread, slot)})
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_local, clear_accum=True)
            T.copy(C_local, C)

    used = kernel_layouts(gemm, "cuda -arch=sm_80")["C_local"]
    np.testing.assert_array_equal(used.threads_of(), thread)
    np.testing.assert_array_equal(used.slots_of(), slot)
    from tilelang import _C
    assert "mma.sync" in _C.lower(gemm.handle, "cuda -arch=sm_80").lowering_report()


def test_conflict_with_the_tensor_cores_names_both_lines():
    @T.prim_func
    def gemm(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C_local: T.Fragment(C_local.shape, forward_thread_fn=lambda i, j: (i % 4) * 32 + j % 32,
                                                   forward_index_fn=lambda i, j: (i // 4) * 2 + j // 32)})
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_local)
            T.copy(C_local, C)

    from tilelang import _C
    with pytest.raises(TileLangLayoutError, match=r"conflicting layouts for fragment 'C_local': given\(64x64 .*"
                                                  r"\(required at .*test_user_fragments.py:\d+.*\) and mma\("):
        _C.lower(gemm.handle, "cuda -arch=sm_80")


def _annotated(fragment_of):
    return scale_rows(fragment_of)


def test_not_a_digit_split_is_refused():
    with pytest.raises(TileLangLayoutError, match=r"the T\.Fragment for 'F' is not a split of its indices over "
                                                  r"threads and slots: element \[1, 1\] \(copy 0\) is at thread "
                                                  r"32, slot 0; a split of the indices into thread and slot digits "
                                                  r"puts it at thread 34, slot 0"):
        # Odd rows swap neighbouring columns' threads: j ^ (i % 2) is no sum of digits.
        _annotated(lambda F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: (i % 4) * 32 + (j ^ (i % 2)),
                                        forward_index_fn=lambda i, j: i // 4))


def test_reducing_a_fragment_held_in_copies_says_why():
    from tilelang import _C
    frag = lambda F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: (i % 2) * 32 + j,  # noqa: E731
                                forward_index_fn=lambda i, j: i // 2)
    with pytest.raises(tilelang.errors.TileLangUnsupportedError,
                       match=r"reduces a fragment each element of which one thread holds; F is held in 2 copies"):
        _C.lower(scale_rows(frag).handle, "cuda -arch=sm_80")


def test_thread_and_slot_moving_together_is_refused():
    with pytest.raises(TileLangLayoutError, match=r"moving the columns by 16 changes both the thread and the slot"):
        _annotated(lambda F: T.Fragment(F.shape, forward_fn=lambda i, j: [(i % 4) * 32 + j % 32, i // 4 + j // 16]))


def test_two_elements_in_one_place_is_refused():
    with pytest.raises(TileLangLayoutError, match=r"elements 8 apart along the rows share a thread and slot"):
        _annotated(lambda F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: (i % 4) * 32 + j,
                                        forward_index_fn=lambda i, j: (i // 4) % 2))


def test_too_many_threads_is_refused():
    with pytest.raises(TileLangLayoutError, match=r"uses threads 0\.\.255, which does not divide the 128 threads"):
        from tilelang import _C
        _C.lower(_annotated(lambda F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: (i % 8) * 32 + j,
                                                 forward_index_fn=lambda i, j: i // 8)).handle, "cuda -arch=sm_80")


def test_shape_and_scope_errors():
    with pytest.raises(TileLangShapeError, match=r"the T\.Fragment's shape \[8, 32\] is not the shape of 'F' "
                                                 r"\[16, 32\]"):
        _annotated(lambda F: T.Fragment([8, 32], **ROWS_BY_FOUR))

    with pytest.raises(TileLangLayoutError, match=r"'S' is in scope 'shared.dyn'; a T\.Fragment is for fragments"):
        @T.prim_func
        def main(A: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((16, 32), "float32")
                T.annotate_layout({S: T.Fragment(S.shape, **ROWS_BY_FOUR)})
                T.copy(A, S)


def test_digits_of_a_fragment():
    """The encoding layout inference reads: digits most significant first per axis."""
    f = T.Fragment([16, 32], **ROWS_BY_FOUR)
    assert fragment_digits(f) == "2:l:2,2:l:1,2:t:64,2:t:32;2:t:16,2:t:8,2:t:4,2:t:2,2:t:1"
    r = T.Fragment([64], forward_thread_fn=lambda i, rep: i + 64 * rep, forward_index_fn=lambda i: 0, replicate=2)
    assert fragment_digits(r).endswith("|2:64")


def test_index_inferred_from_the_thread(target):
    """Only forward_thread_fn: the slot is made of the index digits the thread leaves out, in
    order (upstream's per-token cast gives its fragment so)."""
    frag = lambda F: T.Fragment(F.shape, forward_thread_fn=lambda i, j: (i // 4) * 32 + j)  # noqa: E731
    _check(scale_rows(frag), target)
    used = kernel_layouts(scale_rows(frag), "cuda -arch=sm_80")["F"]
    i, j = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    np.testing.assert_array_equal(used.threads_of()[0], (i // 4) * 32 + j)
    np.testing.assert_array_equal(used.slots_of(), i % 4)
    # Two left-out digits, from two indices: the first index's is the more significant.
    g = T.Fragment([8, 128], forward_thread_fn=lambda i, j: (i // 2) * 32 + j % 32)
    i, j = np.meshgrid(np.arange(8), np.arange(128), indexing="ij")
    np.testing.assert_array_equal(g.slots_of(), (i % 2) * 4 + j // 32)


def test_fragment_on_a_local_array(target):
    """A local array holds each element in every thread at its own slot: a T.Fragment that
    says the same (upstream's MLA combine, `lambda i: i` on a [1] array) changes nothing;
    one that would fold the array's elements together is refused."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=64):
            acc = T.alloc_local([1], "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i: i)})
            T.clear(acc)
            for k in T.serial(64):
                acc[0] += A[k]
            B[0] = acc[0]

    a = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    b = np.zeros(1, np.float32)
    tilelang.compile(main, target=target)(a, b)
    np.testing.assert_allclose(b, [a.sum()], rtol=1e-5)

    with pytest.raises(TileLangLayoutError, match=r"'L' is in scope 'local'; a T\.Fragment is for fragments"):
        @T.prim_func
        def folded(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                L = T.alloc_local([4], "float32")
                T.annotate_layout({L: T.Fragment(L.shape, forward_thread_fn=lambda i: i)})
                for k in T.serial(4):
                    L[k] = A[k]


def split_kv_combine(heads=4, num_split=8, dim=128):
    """The combine step of split-KV decoding in upstream's form: each of 128 threads keeps
    all num_split log-sum-exps in its slots (forward_fn=lambda k, j: (j, k)), reduced along
    the splits, then read as lse[k, j] with k an outer serial loop's variable."""
    @T.prim_func
    def combine(glse: T.Tensor((heads, num_split), "float32"), partial: T.Tensor((heads, num_split, dim), "float32"),
                out: T.Tensor((heads, dim), "float32")):
        with T.Kernel(heads, threads=128) as h:
            po = T.alloc_fragment([dim], "float32")
            acc = T.alloc_fragment([dim], "float32")
            lse = T.alloc_fragment([num_split, 128], "float32")
            lse_max = T.alloc_fragment([128], "float32")
            lse_sum = T.alloc_fragment([128], "float32")
            scale = T.alloc_fragment([128], "float32")
            T.annotate_layout({lse_sum: T.Fragment(lse_sum.shape, forward_thread_fn=lambda i: i),
                               lse_max: T.Fragment(lse_max.shape, forward_thread_fn=lambda i: i),
                               lse: T.Fragment(lse.shape, forward_fn=lambda k, j: (j, k))})
            T.clear(lse_sum)
            T.clear(acc)
            for k, j in T.Parallel(num_split, 128):
                lse[k, j] = glse[h, k]
            T.reduce_max(lse, lse_max, dim=0, clear=True)
            for k in T.serial(num_split):
                for j in T.Parallel(128):
                    lse_sum[j] += T.exp2(lse[k, j] - lse_max[j])
            for j in T.Parallel(128):
                lse_sum[j] = T.log2(lse_sum[j]) + lse_max[j]
            for k in T.serial(num_split):
                for i in T.Parallel(dim):
                    po[i] = partial[h, k, i]
                for j in T.Parallel(128):
                    scale[j] = T.exp2(lse[k, j] - lse_sum[j])
                for i in T.Parallel(dim):
                    acc[i] += po[i] * scale[i]
            T.copy(acc, out[h, :])

    return combine


def test_fragment_read_at_an_outer_loops_index(target):
    rng = np.random.default_rng(3)
    glse = rng.standard_normal((4, 8)).astype(np.float32)
    partial = rng.standard_normal((4, 8, 128)).astype(np.float32)
    out = np.zeros((4, 128), np.float32)
    tilelang.compile(split_kv_combine(), target=target)(glse, partial, out)
    w = np.exp2(glse - np.log2(np.exp2(glse).sum(axis=1, keepdims=True)))
    np.testing.assert_allclose(out, (partial * w[:, :, None]).sum(axis=1), rtol=1e-4, atol=1e-5)


def outer_index_along_threads(write):
    @T.prim_func
    def main(A: T.Tensor((8, 128), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment([8, 128], "float32")
            G = T.alloc_fragment([128], "float32")
            T.annotate_layout({F: T.Fragment(F.shape, forward_fn=lambda k, j: ((k % 2) * 64 + j % 64,
                                                                           (k // 2) * 2 + j // 64))})
            T.copy(A, F)
            T.clear(G)
            for k in T.serial(8):
                for j in T.Parallel(128):
                    G[j] += F[k, j] * (k + 1)
                    if write:
                        F[k, j] = 0.0
            T.copy(G, B)

    return main


def test_outer_index_along_a_thread_dimension_reads_through_shared_memory(target):
    """Read at an outer loop's index along a dimension spread over the threads (upstream's
    mha_inference combine reads lse[k, i] so): the element may be in another thread, so a
    fragment the loop only reads reaches it through shared memory (a reported slower path)."""
    a = np.random.default_rng(6).standard_normal((8, 128)).astype(np.float32)
    b = np.zeros(128, np.float32)
    tilelang.compile(outer_index_along_threads(False), target=target)(a, b)
    np.testing.assert_allclose(b, (a * np.arange(1, 9)[:, None]).sum(axis=0), rtol=1e-5, atol=1e-5)


def test_outer_index_along_a_thread_dimension_of_a_written_fragment_is_refused():
    from tilelang import _C
    # k takes each of its 8 values in the check: already at k = 0 the thread running j (G's
    # vectors of 4: thread j // 4) would write F[0, j], which thread j % 64 holds.
    with pytest.raises(TileLangLayoutError, match=r"fragment 'F' is laid out as given\(8x128 .*a thread would need "
                                                  r"an element another thread holds \(at k = 0\)"):
        _C.lower(outer_index_along_threads(True).handle, "cuda -arch=sm_80")


def test_loop_in_another_order_than_its_fragment(target):
    """T.Parallel(N, F, KL) writing temp[i, kl, f]: the nest is spread over the threads in
    the fragment's order (its iterations are independent), so every thread writes what it
    holds (upstream's conv puzzle; it was a layout conflict)."""
    @T.prim_func
    def main(X: T.Tensor((16, 32), "float32"), K: T.Tensor((32, 8), "float32"), O: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, threads=128):
            temp = T.alloc_fragment((16, 32, 8), "float32")
            s = T.alloc_fragment((16, 32), "float32")
            for i, f, kl in T.Parallel(16, 8, 32):
                temp[i, kl, f] = X[i, kl] * K[kl, f]
            T.reduce_sum(temp, s, dim=2)
            T.copy(s, O)

    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    k = rng.standard_normal((32, 8)).astype(np.float32)
    o = np.zeros((16, 32), np.float32)
    tilelang.compile(main, target=target)(x, k, o)
    np.testing.assert_allclose(o, x * k.sum(axis=1), rtol=1e-5, atol=1e-5)



def split_combine(splits=4, heads=8, batch=2):
    @T.prim_func
    def main(glse: T.Tensor((batch, heads, splits), "float32"), out: T.Tensor((batch, heads), "float32")):
        with T.Kernel(heads, batch, threads=128) as (by, bz):
            lse = T.alloc_fragment((splits, 1), "float32")
            lse_max = T.alloc_fragment((1,), "float32")
            for k in T.Parallel(splits):
                lse[k, 0] = glse[bz, by, k]
            T.reduce_max(lse, lse_max, dim=0, clear=True)
            out[bz, by] = lse_max[0]

    return main


def unit_middle_dimension(M=4, N=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, 1, N), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((M, 1, N), "float32")
            for i, j in T.Parallel(M, N):
                F[i, 0, j] = A[i, j] * 2.0 + j
            T.copy(F, B)

    return main


def test_loop_over_a_fragment_with_a_unit_dimension(target):
    """T.Parallel(splits) writing lse[k, 0] of a [splits, 1] fragment (upstream's split-KV
    combine), T.Parallel(M, N) writing F[i, 0, j]: the loop is spread like the fragment, with
    a one-iteration loop for the unit dimension (it was a layout conflict on the GPU targets)."""
    rng = np.random.default_rng(8)
    g = rng.standard_normal((2, 8, 4)).astype(np.float32)
    o = np.zeros((2, 8), np.float32)
    tilelang.compile(split_combine(), target=target)(g, o)
    np.testing.assert_array_equal(o, g.max(axis=-1))
    a = rng.standard_normal((4, 32)).astype(np.float32)
    b = np.zeros((4, 1, 32), np.float32)
    tilelang.compile(unit_middle_dimension(), target=target)(a, b)
    np.testing.assert_allclose(b[:, 0, :], a * 2 + np.arange(32), rtol=1e-6)


@pytest.mark.parametrize("make", [split_combine, unit_middle_dimension])
def test_loop_over_a_fragment_with_a_unit_dimension_compiles_for_cuda(make):
    from tilelang import _C
    lowered = _C.lower(make().handle, "cuda -arch=sm_90a")
    assert "__global__" in _C.codegen(lowered, "cuda -arch=sm_90a")
