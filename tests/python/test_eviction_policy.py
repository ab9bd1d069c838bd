"""T.copy(..., eviction_policy=...): a TMA load's lines get that L2 priority (a cache policy
from createpolicy on cp.async.bulk.tensor .L2::cache_hint); the other loads of the kernel
get none; a copy that is not a TMA load says in the lowering report that the hint had no
effect; an unknown policy is a typed error."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError

from sass import sass_of

SM90 = "cuda -arch=sm_90a"


def pipelined_gemm(policy, M=256, N=256, K=256, bm=128, bn=128, bk=64, cluster_mask=None, disable_tma=False):
    """C = A @ B with A's tiles loaded under `policy`, B's with none."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=256, cluster_dims=(2, 1, 1) if cluster_mask else None) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(K // bk, num_stages=3):
                if cluster_mask:
                    T.copy_cluster(A[by * bm, k * bk], A_s, cluster_mask=cluster_mask, eviction_policy=policy)
                else:
                    T.copy(A[by * bm, k * bk], A_s, eviction_policy=policy, disable_tma=disable_tma)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return gemm


@pytest.mark.parametrize("policy, kind", [("evict_normal", 0), ("evict_first", 1), ("evict_last", 2)])
def test_tma_loads_of_the_copy_carry_the_policy(policy, kind):
    source = _C.codegen(_C.lower(pipelined_gemm(policy).handle, SM90, []), SM90)
    loads = [ln.strip() for ln in source.splitlines() if "tl::tma_load(" in ln]
    a_loads = [ln for ln in loads if ln.startswith("tl::tma_load(A_tmap")]
    b_loads = [ln for ln in loads if ln.startswith("tl::tma_load(B_tmap")]
    assert a_loads and b_loads
    assert all(ln.endswith(f", tl::l2_policy<{kind}>());") for ln in a_loads), a_loads
    assert not any("l2_policy" in ln for ln in b_loads), b_loads


def test_policy_reaches_the_machine_code():
    # The hinted loads read a cache-policy descriptor (UTMALDG ... desc[...]); the others do not.
    sass, _, _ = sass_of(pipelined_gemm("evict_first"))
    tma = [ln for ln in sass.splitlines() if "UTMALDG" in ln]
    hinted = [ln for ln in tma if "desc[" in ln]
    assert hinted and len(hinted) < len(tma), tma


def test_multicast_load_carries_the_policy():
    source = _C.codegen(_C.lower(pipelined_gemm("evict_last", cluster_mask=0b11).handle, SM90, []), SM90)
    multicast = [ln.strip() for ln in source.splitlines() if "tl::tma_load_multicast(" in ln]
    assert multicast and all(ln.endswith(", tl::l2_policy<2>());") for ln in multicast), multicast
    sass, _, _ = sass_of(pipelined_gemm("evict_last", cluster_mask=0b11))
    assert any("UTMALDG" in ln and "MULTICAST" in ln and "desc[" in ln for ln in sass.splitlines())


def test_copy_that_is_not_a_tma_load_reports_the_hint_unused():
    lowered = _C.lower(pipelined_gemm("evict_first", disable_tma=True).handle, SM90, [])
    report = lowered.lowering_report()
    assert "eviction_policy has no effect (not a TMA load: T.copy(..., disable_tma=True)" in report, report
    assert "l2_policy" not in _C.codegen(lowered, SM90)


def test_copy_with_policy_runs(target, rng):
    # Elsewhere the hint changes nothing: the copy is the same.
    @T.prim_func
    def copy_rows(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=64) as bx:
            S = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32, 0], S, eviction_policy="evict_first")
            T.copy(S, B[bx * 32, 0])

    k = tilelang.compile(copy_rows, target=target)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(b, a)


def test_unknown_policy_is_a_type_error():
    with pytest.raises(TileLangTypeError, match=r"eviction_policy='evict_early'\): not an eviction policy") as e:
        pipelined_gemm("evict_early")
    assert "'evict_first'" in str(e.value)


def test_tma_store_takes_no_policy():
    with pytest.raises(TileLangTypeError, match="a store takes no barrier, no cluster_mask and no eviction_policy"):
        @T.prim_func
        def store(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((64, 64), "float16")
                T.clear(S)
                T.tma_copy(S, A, eviction_policy="evict_first")
