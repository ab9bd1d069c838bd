"""The Hopper tensor-core path: T.gemm on wgmma (sm_90a).

Without a GPU (CI): the kernels are lowered and compiled by NVRTC for sm_90a and their
machine code must show the warpgroup instructions (HGMMA, QGMMA for fp8, IGMMA for int8)
and no local memory; the lowering report names the instruction and every downgrade.
On a GPU (TILELANG_TEST_TARGETS=cuda on an H100/H200): the same kernels against numpy on
random inputs, over operand layouts, tile shapes, warpgroup splits and ragged edges."""
import re
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import tilelang
from tilelang import _C
from tilelang.errors import TileLangPerformanceWarning

from kernels.gemm import matmul
from sass import sass_of
from sm90 import hopper_path_forced_off, require_sm90

SM90 = "cuda -arch=sm_90a"
CONSUMER_TILE_LOADS = "tl.disable_producer_tile_loads"


def _sass(func, switches=()):
    return sass_of(func, switches)


# (name, matmul arguments, SASS mnemonic, instructions per K step of one warpgroup)
SASS_CASES = [
    ("bf16_nn_128x256x64_2wg", dict(M=1024, N=1024, K=1024, block_M=128, block_N=256, block_K=64,
                                     in_dtype="bfloat16", num_stages=3, threads=256), "HGMMA.64x128x16.F32.BF16", 8),
    ("fp16_nt_128x128x64_1wg", dict(M=512, N=512, K=512, block_M=128, block_N=128, block_K=64,
                                     in_dtype="float16", transpose_B=True, num_stages=3), "HGMMA.64x128x16.F32", 8),
    ("bf16_tn_64x64x32", dict(M=256, N=256, K=2048, block_M=64, block_N=64, block_K=32, in_dtype="bfloat16",
                              transpose_A=True), "HGMMA.64x64x16.F32.BF16", 2),
    ("fp8_nt_128x256x128_2wg", dict(M=1024, N=1024, K=1024, block_M=128, block_N=256, block_K=128,
                                    in_dtype="float8_e4m3", transpose_B=True, num_stages=3, threads=256),
     "QGMMA.64x128x32.F32.E4M3.E4M3", 8),
    ("int8_nt_128x128x64", dict(M=512, N=512, K=512, block_M=128, block_N=128, block_K=64, in_dtype="int8",
                                out_dtype="int32", accum_dtype="int32", transpose_B=True, num_stages=3),
     "IGMMA.64x128x32.S8.S8", 4),
    # float16 accumulators: two per register.
    ("fp16_acc16_128x256x64_2wg", dict(M=1024, N=1024, K=1024, block_M=128, block_N=256, block_K=64,
                                       in_dtype="float16", out_dtype="float16", accum_dtype="float16", num_stages=3,
                                       threads=256), "HGMMA.64x128x16.F16 ", 8),
    ("fp8_acc16_nt_128x256x128_2wg", dict(M=1024, N=1024, K=1024, block_M=128, block_N=256, block_K=128,
                                          in_dtype="float8_e4m3", out_dtype="float16", accum_dtype="float16",
                                          transpose_B=True, num_stages=3, threads=256),
     "QGMMA.64x128x32.F16.E4M3.E4M3", 8),
]


@pytest.mark.parametrize("name, args, mnemonic, per_step", SASS_CASES, ids=[c[0] for c in SASS_CASES])
def test_wgmma_sass(name, args, mnemonic, per_step):
    """Each K step issues the expected warpgroup instructions on operands that a producer
    warpgroup loads by TMA (UTMALDG) under mbarriers (SYNCS), with the registers rebalanced
    between the roles (USETMAXREG), and nothing goes to local memory."""
    sass, usage, report = _sass(matmul(**args))
    assert "wgmma m64n" in report and "[slower path" not in report, report
    # ptxas may unroll the K loop: whole K steps of instructions.
    count = sass.count(mnemonic)
    assert count >= per_step and count % per_step == 0, (count, [l for l in sass.splitlines() if "GMMA" in l][:4])
    assert "HMMA" not in sass and "LDSM" not in sass
    assert "WARPGROUP.ARRIVE" in sass and "UTMALDG" in sass and "LDGSTS" not in sass
    assert "SYNCS.PHASECHK" in sass and "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass
    assert "pipelined by a TMA producer warpgroup" in report and "warp specialised" in report
    assert "LDL" not in sass and "STL" not in sass and "LOCAL:0" in usage, usage


@pytest.mark.parametrize("switches, store", [((), " STS"), (("tl.disable_tma_lower",), " STG.")])
def test_converting_epilogue_stores_whole_words(switches, store):
    """The float accumulators are rounded to bfloat16 in pairs and stored 32 bits at a time
    (a thread owns two adjacent columns of each accumulator row): half as many stores as
    one 16-bit store per element; into the staging tile of the TMA store, or (TMA off)
    straight to global memory."""
    sass, _, _ = _sass(matmul(**dict(SASS_CASES[0][1], out_dtype="bfloat16")), switches)
    stores = [l.split()[1] for l in sass.splitlines() if store in l]
    assert stores and all(op in ("STG.E", "STS") for op in stores), sorted(set(stores))
    assert "F2FP.BF16.F32.PACK_AB" in sass
    assert ("UTMASTG" in sass) == (not switches)


def test_epilogue_goes_out_through_the_pipelines_free_bytes_by_tma_store():
    """After the K loop the accumulator is written into a swizzled shared tile that reuses
    the pipeline's bytes (no more shared memory than before) and leaves by TMA store; the
    lowering report says so."""
    func = matmul(**dict(SASS_CASES[0][1], out_dtype="bfloat16"))
    sass, usage, report = _sass(func)
    assert "through a shared tile in the pipeline's free bytes (65536 bytes), then by TMA store" in report, report
    assert "T.copy C_local_staged -> C by TMA store (cp.async.bulk.tensor, boxes of 128 x 64, 128B swizzle)" in report
    assert "UTMASTG" in sass and "UBLKCP" not in sass and " STG." not in sass
    plain = _C.lower(func.handle, SM90, ["tl.disable_tma_lower"]).lowering_report()
    import re
    planned = lambda r: re.findall(r": shared memory (\d+) bytes", r)  # noqa: E731
    # The three stages of A and B tiles and the six mbarriers: the staging tile adds nothing.
    assert planned(report) == [str(3 * (128 * 64 + 64 * 256) * 2 + 6 * 8)], planned(report)
    assert "TMA store" not in plain


@pytest.mark.parametrize("switch", ["tl.disable_tma_lower", "tl.disable_warp_specialized"])
def test_disable_tma_takes_cp_async_and_says_so(switch):
    func = matmul(1024, 1024, 1024, 128, 256, 64, in_dtype="bfloat16", num_stages=3, threads=256)
    sass, usage, report = _sass(func, [switch])
    assert "HGMMA.64x128x16.F32.BF16" in sass and "LDGSTS" in sass and "UTMALDG" not in sass
    assert f"copies by cp.async, not TMA [slower path: not TMA: pass config {switch} is set]" in report
    assert "LOCAL:0" in usage


def test_barrier_protocol_is_checked_for_run_time_trip_counts():
    """The warp-specialised pipeline's mbarrier protocol is proven free of hangs for trip
    counts around the stage count when K is a run-time value, and for the one trip count
    when it is a constant."""
    import tilelang.language as T
    report = _C.lower(matmul(256, 256, T.dynamic("k"), 128, 128, 64, in_dtype="float16", num_stages=3,
                             transpose_A=True).handle, SM90).lowering_report()
    assert "barrier protocol checked (no hang, alternating parities) for trip counts 0, 1, 2, 3, 4, 6, 7, 11" in report
    fixed = _C.lower(matmul(256, 256, 640, 128, 128, 64, in_dtype="float16", num_stages=4).handle, SM90)
    assert "for trip counts 10\n" in fixed.lowering_report()


def test_disable_wgmma_takes_mma_sync_and_says_so():
    func = matmul(512, 512, 512, 128, 128, 32, in_dtype="bfloat16", num_stages=3)
    sass, _, report = _sass(func, ["tl.disable_wgmma"])
    assert "HGMMA" not in sass and "HMMA.16816.F32.BF16" in sass
    assert "mma.sync m16n8k16" in report and "[slower path: not wgmma: pass config tl.disable_wgmma is set]" in report


def test_lowering_report_names_wgmma_and_each_downgrade():
    report = _C.lower(matmul(1024, 1024, 1024, 128, 256, 64, in_dtype="bfloat16", num_stages=3,
                             threads=256).handle, SM90).lowering_report()
    assert "T.gemm (bfloat16 x bfloat16 -> float32) on wgmma m64n128k16, 1 x 2 warpgroups; A from shared " \
           "memory (descriptor); A_shared swizzled 128B; B_shared swizzled 128B in panels of 64" in report, report
    # FullRow puts both warpgroups along M: one m64n256 instruction each.
    import tilelang.language as T
    rows = _C.lower(_policy_gemm(T.GemmWarpPolicy.FullRow).handle, SM90).lowering_report()
    assert "wgmma m64n256k16, 2 x 1 warpgroups" in rows, rows
    # A 32-row tile has no 64-row piece for a warpgroup: mma.sync, named as the slower path.
    small = _C.lower(matmul(256, 256, 256, 32, 32, 32, in_dtype="float16").handle, SM90).lowering_report()
    assert "mma.sync m16n8k16" in small
    assert "[slower path: not wgmma: the 32 x 32 tile does not split into 64-row pieces over 1 warpgroup(s)]" in small
    # float32 inputs: SIMT, and wgmma's reason is given too.
    simt = _C.lower(matmul(128, 128, 64).handle, SM90).lowering_report()
    assert "SIMT multiply-adds" in simt and "not wgmma: it takes float16/bfloat16/float8 inputs" in simt
    # sm_90 without the 'a' features, and older GPUs, say nothing about wgmma on sm_80.
    plain = _C.lower(matmul(256, 256, 256, 128, 128, 32, in_dtype="float16").handle, "cuda -arch=sm_90").lowering_report()
    assert "not wgmma: it needs the sm_90a target (the target is sm_90)" in plain
    old = _C.lower(matmul(256, 256, 256, 128, 128, 32, in_dtype="float16").handle, "cuda -arch=sm_80").lowering_report()
    assert "slower path" not in old


def _policy_gemm(policy, M=256, N=256, K=256):
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "bfloat16")
            B_s = T.alloc_shared((64, 256), "bfloat16")
            C_f = T.alloc_fragment((128, 256), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_f, policy=policy)
            T.copy(C_f, C[by * 128, bx * 256])

    return main


def test_slower_path_warns_once(monkeypatch):
    """Compiling a kernel that takes a slower instruction than it could warns once per path."""
    jk = sys.modules["tilelang.jit.kernel"]
    monkeypatch.setattr(jk, "_warned", set())
    report = ("k.py:3: T.gemm (float16 x float16 -> float32) on mma.sync m16n8k16, 4 x 1 warps "
              "[slower path: not wgmma: pass config tl.disable_wgmma is set]\nk.py:1: other line")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        jk._warn_slower_paths(report)
        jk._warn_slower_paths(report)
    assert len(seen) == 1 and issubclass(seen[0].category, TileLangPerformanceWarning)
    assert "tl.disable_wgmma" in str(seen[0].message)


def test_wgmma_tile_layout_is_canonical():
    """The operand tiles start on 1 KiB and the dynamic shared block is 1 KiB aligned, as
    128-byte swizzle atoms need."""
    lowered = _C.lower(matmul(1024, 1024, 1024, 128, 256, 64, in_dtype="bfloat16", num_stages=3,
                              threads=256).handle, SM90)
    source = _C.codegen(lowered, SM90)
    assert "__align__(1024) uint8_t tl_dyn_smem[]" in source
    assert "tl::wgmma_desc(" in source and "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in source
    assert source.count("tl::fence_proxy_async();") >= 1
    import re
    prefetched = re.findall(r"tl::prefetch_tensor_map\(([ABC])_tmap\d\);", source)
    assert sorted(prefetched) == ["A", "B", "C"], prefetched  # the operands' maps and the TMA store's


def _async_gemm(M, N, K, dtype="float16", spelling="gemm", threads=128):
    """One M x N x K product issued with wg_wait=-1 (or by T.wgmma_gemm) and waited for by
    T.wait_wgmma."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:  # noqa: F841
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            if spelling == "gemm":
                T.gemm(A_s, B_s, C_f, clear_accum=True, wg_wait=-1)
            else:
                T.wgmma_gemm(A_s, B_s, C_f, clear_accum=True)
            T.wait_wgmma(0)
            T.copy(C_f, C)

    return main


def test_run_time_strides_keep_cp_async_and_say_why():
    import tilelang.language as T
    report = _C.lower(matmul(256, 256, T.dynamic("k"), 128, 128, 64, in_dtype="float16").handle, SM90).lowering_report()
    assert "[slower path: not TMA: A's stride along dimension 0 is known only at run time" in report
    odd = _C.lower(matmul(256, 256, 196, 128, 128, 64, in_dtype="float16").handle, SM90).lowering_report()
    assert "A's stride along dimension 0 is not a multiple of 16 bytes" in odd


def _row_vector_pipeline(n=64, threads=256, steps=4):
    import tilelang.language as T

    @T.prim_func
    def main(X: T.Tensor((steps * n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads):
            X_s = T.alloc_shared((n,), "float32")
            acc = T.alloc_fragment((n,), "float32")
            T.clear(acc)
            for i in T.Pipelined(steps, num_stages=2):
                T.copy(X[i * n:(i + 1) * n], X_s)
                for j in T.Parallel(n):
                    acc[j] += X_s[j]
            T.copy(acc, Y)

    return main


def test_small_row_tile_moves_by_cp_async_vectors():
    # 64 floats over 256 threads: 16 threads move 16 bytes each, by cp.async (the guard on the
    # thread goes around the vector; lane by lane the copy was a synchronous load and store).
    src = _C.codegen(_C.lower(_row_vector_pipeline().handle, SM90), SM90)
    assert re.search(r"if \(tx < 16\) \{\s*tl::cp_async<16>\(&X_s\[", src), src
    assert not re.search(r"X_s\[[^\]]*\] = X\[", src), src


def test_small_row_tile_pipeline_numerics(target, rng):
    kernel = tilelang.compile(_row_vector_pipeline(), out_idx=[1], target=target)
    x = rng.standard_normal(4 * 64).astype(np.float32)
    if target.startswith("cuda"):
        import torch
        y = kernel(torch.from_numpy(x).cuda()).cpu().numpy()
    else:
        y = np.asarray(kernel(x))
    np.testing.assert_allclose(y, x.reshape(4, 64).sum(0), rtol=1e-5, atol=1e-5)


def _scaled_products(steps=4, M=64, N=64, K=64):
    """out = sum_i (A_i B^T) * w_i, w_i a row of N weights per step (a 1-D tile)."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((steps * M, K), "float16"), B: T.Tensor((N, K), "float16"),
             W: T.Tensor((steps * N,), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            w_s = T.alloc_shared((N,), "float32")
            S = T.alloc_fragment((M, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(B, B_s)
            T.clear(acc)
            for i in T.Pipelined(steps, num_stages=2):
                T.copy(A[i * M:(i + 1) * M, :], A_s)
                T.copy(W[i * N:(i + 1) * N], w_s)
                T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
                for m, n in T.Parallel(M, N):
                    acc[m, n] += S[m, n] * w_s[n]
            T.copy(acc, O)

    return main


def test_row_tile_joins_the_tma_pipeline():
    # The 1-D tile of weights moves by TMA (one unswizzled box) with the 2-D one, so the
    # pipeline keeps its TMA producer warpgroup.
    lowered = _C.lower(_scaled_products().handle, SM90)
    report = lowered.lowering_report()
    assert "pipelined by a TMA producer warpgroup" in report and "not TMA" not in report, report
    src = _C.codegen(lowered, SM90)
    assert re.search(r"tl::tma_load\(W_tmap\d+, &w_s\[i_?\d* % 2 \* 64\]", src), src


def test_row_tile_tma_numerics(target, rng):
    require_sm90(target)
    import torch
    kernel = tilelang.compile(_scaled_products(), out_idx=[3], target=target)
    a = torch.randn(4 * 64, 64, device="cuda").half()
    b = torch.randn(64, 64, device="cuda").half()
    w = torch.randn(4 * 64, device="cuda")
    ref = sum((a[i * 64:(i + 1) * 64].double() @ b.double().T) * w[i * 64:(i + 1) * 64].double() for i in range(4))
    out = kernel(a, b, w)
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5


@pytest.mark.parametrize("spelling", ["gemm", "wgmma_gemm"])
def test_wait_wgmma_completes_an_asynchronous_gemm(spelling):
    """wg_wait=-1 (and T.wgmma_gemm) leaves the wgmma group in flight; T.wait_wgmma waits
    for it and fences the accumulators before they are read."""
    lowered = _C.lower(_async_gemm(64, 64, 64, spelling=spelling).handle, SM90)
    source = _C.codegen(lowered, SM90)
    gemm = source.index("tl::wgmma_commit();")
    assert "tl::wgmma_wait<0>();" in source[gemm:] and "tl::wgmma_wait" not in source[:gemm]
    _sass(_async_gemm(64, 64, 64, spelling=spelling))  # assembles


def test_wgmma_gemm_refuses_to_fall_back():
    """Where wgmma cannot take the product, T.wgmma_gemm is an error with the reason (T.gemm
    would take mma.sync and say so)."""
    from tilelang.errors import TileLangUnsupportedError
    with pytest.raises(TileLangUnsupportedError, match=r"T.wgmma_gemm cannot use wgmma here: .*warpgroup") as e:
        _C.lower(_async_gemm(32, 32, 32, spelling="wgmma_gemm", threads=128).handle, SM90)
    assert "test_hopper.py" in str(e.value)
    with pytest.raises(TileLangUnsupportedError, match="T.wgmma_gemm cannot use wgmma here"):
        _C.lower(_async_gemm(64, 64, 64, spelling="wgmma_gemm").handle, "cuda -arch=sm_80")
    assert "mma.sync" in _C.lower(_async_gemm(64, 64, 64).handle, "cuda -arch=sm_80").lowering_report()


def test_barrier_wait_and_arrive_are_the_mbarrier_calls():
    """Upstream's T.barrier_wait(b, parity) / T.barrier_arrive(b) lower as T.mbarrier_wait_parity
    / T.mbarrier_arrive; a missing parity is an error at the call."""
    import tilelang.language as T

    def kernel(spelled_upstream, parity=0):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                bar = T.alloc_barrier([128])
                if spelled_upstream:
                    T.barrier_arrive(bar)
                    T.barrier_wait(bar, parity)
                else:
                    T.mbarrier_arrive(bar)
                    T.mbarrier_wait_parity(bar, parity)
                A[T.get_thread_binding()] = 1.0

        return main

    upstream = _C.codegen(_C.lower(kernel(True).handle, SM90), SM90)
    ours = _C.codegen(_C.lower(kernel(False).handle, SM90), SM90)
    assert upstream == ours and "tl::mbarrier_wait(" in ours and "tl::mbarrier_arrive(" in ours
    with pytest.raises(tilelang.errors.TileLangTypeError, match="T.barrier_wait: the parity to wait for"):
        kernel(True, parity=None)


def _handoff(n=256, producer_regs=40):
    """By hand: a producer warpgroup stages A in shared memory and hands it over through an
    mbarrier; the consumer warpgroup writes twice it to B."""
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=256) as bx:  # noqa: F841
            S = T.alloc_shared((n,), "float32")
            full = T.alloc_barrier([128])
            tx = T.get_thread_binding()
            if tx < 128:
                T.dec_max_nreg(producer_regs)
                for i in T.serial(n // 128):
                    S[i * 128 + tx] = A[i * 128 + tx]
                T.fence_proxy_async()
                T.mbarrier_arrive(full[0])
            else:
                T.inc_max_nreg(232)
                T.mbarrier_wait_parity(full, 0)
                for i in T.serial(n // 128):
                    B[i * 128 + tx - 128] = S[i * 128 + tx - 128] * 2.0

    return main


def test_by_hand_barriers_and_register_budgets_compile():
    """T.alloc_barrier, T.mbarrier_arrive / _wait_parity, T.dec/inc_max_nreg and
    T.fence_proxy_async become the mbarrier (SYNCS) and setmaxnreg (USETMAXREG) instructions."""
    sass, usage, _ = _sass(_handoff())
    assert "SYNCS.EXCH.64" in sass and "SYNCS.PHASECHK" in sass and "SYNCS.ARRIVE" in sass
    assert "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass and "LOCAL:0" in usage


def test_by_hand_names_check_their_arguments():
    import tilelang.language as T
    from tilelang.errors import TileLangShapeError, TileLangTypeError
    with pytest.raises(TileLangShapeError, match="reg_count must be a multiple of 8 in 24..256, got 30"):
        _handoff(producer_regs=30)

    def zero_count():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                T.alloc_barrier(0)
        return main

    with pytest.raises(TileLangShapeError, match="arrival counts must be at least 1, got 0"):
        zero_count()

    def not_a_barrier():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                T.mbarrier_arrive(3.5)
        return main

    with pytest.raises(TileLangTypeError, match="expected a barrier from T.alloc_barrier"):
        not_a_barrier()


# --------------------------------------------------------------------------- on the GPU

GPU_CASES = [
    # (M, N, K, block_M, block_N, block_K, in_dtype, transpose_A, transpose_B, stages, threads)
    (256, 512, 256, 128, 256, 64, "bfloat16", False, False, 3, 256),
    (256, 256, 192, 128, 128, 64, "float16", False, True, 3, 128),
    (200, 136, 72, 64, 64, 32, "bfloat16", False, False, 2, 128),   # ragged edges
    (192, 320, 160, 64, 64, 32, "float16", True, False, 2, 128),    # A stored K x M
    (256, 256, 128, 64, 128, 32, "bfloat16", True, True, 3, 128),
    (256, 256, 256, 128, 128, 128, "float16", False, False, 2, 256),  # K panels of 64 in the A tile
    (128, 256, 128, 64, 256, 64, "bfloat16", False, False, 2, 256),  # warpgroups along N
    (512, 512, 512, 256, 128, 64, "bfloat16", False, True, 3, 256),   # two m64 pieces per warpgroup
]


_gpu_only = require_sm90


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "x".join(map(str, c[:6])) + f"-{c[6]}-{'tn'[c[7]]}{'tn'[c[8]]}")
def test_wgmma_gemm_numerics(target, rng, case):
    _gpu_only(target)
    import torch
    M, N, K, bm, bn, bk, dt, ta, tb, stages, threads = case
    kernel = tilelang.compile(matmul(M, N, K, bm, bn, bk, in_dtype=dt, transpose_A=ta, transpose_B=tb,
                                     num_stages=stages, threads=threads), out_idx=[2], target=target)
    assert "wgmma" in kernel.get_lowering_report()
    tdt = getattr(torch, dt)
    a = torch.randn((K, M) if ta else (M, K), device="cuda").to(tdt)
    b = torch.randn((N, K) if tb else (K, N), device="cuda").to(tdt)
    c = kernel(a, b)
    ref = (a.T if ta else a).double() @ (b.T if tb else b).double()
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < 1e-5, err


@pytest.mark.parametrize("policy", ["Square", "FullRow", "FullCol"])
def test_wgmma_warp_policies_numerics(target, rng, policy):
    _gpu_only(target)
    import tilelang.language as T
    import torch
    kernel = tilelang.compile(_policy_gemm(getattr(T.GemmWarpPolicy, policy), 384, 512, 320), out_idx=[2],
                              target=target)
    a = torch.randn(384, 320, device="cuda").to(torch.bfloat16)
    b = torch.randn(320, 512, device="cuda").to(torch.bfloat16)
    ref = a.double() @ b.double()
    err = float((kernel(a, b).double() - ref).norm() / ref.norm())
    assert err < 1e-5, err


def test_by_hand_handoff_numerics(target, rng):
    _gpu_only(target)
    kernel = tilelang.compile(_handoff(), out_idx=[1], target=target)
    a = rng.uniform(-1, 1, 256).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(kernel(a)), a * 2)


@pytest.mark.parametrize("spelling", ["gemm", "wgmma_gemm"])
def test_wait_wgmma_numerics(target, rng, spelling):
    _gpu_only(target)
    kernel = tilelang.compile(_async_gemm(64, 128, 64, spelling=spelling), out_idx=[2], target=target)
    a, b = rng.uniform(-1, 1, (64, 64)).astype(np.float16), rng.uniform(-1, 1, (64, 128)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(kernel(a, b)), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_tma_pipeline_trip_counts(target, rng, num_stages):
    """The warp-specialised TMA pipeline over ceildiv(k, 64) stages for a run-time k (A
    stored K x M so every stride is a constant): trip counts 0, 1, 2, around the stage count
    and many, with a partial last stage read as zeros past the tensor's end."""
    _gpu_only(target)
    import tilelang.language as T
    M, N = 128, 128
    kernel = tilelang.compile(matmul(M, N, T.dynamic("k"), 128, 128, 64, in_dtype="float16", transpose_A=True,
                                     num_stages=num_stages), out_idx=[2], target=target)
    assert hopper_path_forced_off() or "pipelined by a TMA producer warpgroup" in kernel.get_lowering_report()
    for k in (0, 1, 64, 100, 128, 192, 256, 320, 1000):
        a = rng.uniform(-1, 1, (k, M)).astype(np.float16)
        b = rng.uniform(-1, 1, (k, N)).astype(np.float16)
        c = np.asarray(kernel(a, b))
        np.testing.assert_allclose(c, a.astype(np.float64).T @ b.astype(np.float64), rtol=1e-5, atol=1e-3,
                                   err_msg=f"k={k}")


@pytest.mark.parametrize("in_dtype", ["float8_e4m3", "float8_e5m2", "int8"])
def test_wgmma_8bit_numerics(target, rng, in_dtype):
    _gpu_only(target)
    import torch
    M, N, K = 384, 256, 384
    acc = "int32" if in_dtype == "int8" else "float32"
    kernel = tilelang.compile(matmul(M, N, K, 128, 256, 128, in_dtype=in_dtype, out_dtype=acc, accum_dtype=acc,
                                     transpose_B=True, num_stages=3, threads=256), out_idx=[2], target=target)
    assert "wgmma m64n128k32, 1 x 2 warpgroups" in kernel.get_lowering_report()
    if in_dtype == "int8":
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    else:
        np_t = {"float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[in_dtype]
        a = rng.uniform(-2, 2, (M, K)).astype(np_t)
        b = rng.uniform(-2, 2, (N, K)).astype(np_t)
    c = np.asarray(kernel(a, b))
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    if in_dtype == "int8":
        np.testing.assert_array_equal(c, ref.astype(np.int64))
    else:
        from test_kernels import assert_fp8_wgmma_close
        assert_fp8_wgmma_close(c, a, b.T)


@pytest.mark.parametrize("in_dtype", ["float16", "float8_e4m3", "float8_e5m2"])
def test_wgmma_float16_accumulator_numerics(target, rng, in_dtype):
    """float16 accumulators (two per register): each product is added in float16, so the
    error grows with K; against float64, within float16's rounding of every partial sum."""
    _gpu_only(target)
    M, N, K = 256, 256, 256
    fp8 = in_dtype != "float16"
    kernel = tilelang.compile(matmul(M, N, K, 128, 256, 128 if fp8 else 64, in_dtype=in_dtype, out_dtype="float16",
                                     accum_dtype="float16", transpose_B=fp8, num_stages=3, threads=256),
                              out_idx=[2], target=target)
    assert "-> float16) on wgmma" in kernel.get_lowering_report()
    np_t = {"float16": np.float16, "float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[in_dtype]
    a = rng.uniform(-1, 1, (M, K)).astype(np_t)
    b = rng.uniform(-1, 1, (N, K) if fp8 else (K, N)).astype(np_t)
    b64 = b.astype(np.float64).T if fp8 else b.astype(np.float64)
    ref = a.astype(np.float64) @ b64
    c = np.asarray(kernel(a, b)).astype(np.float64)
    # K additions, each rounded to float16 (2^-11 of the running sum, at most the sum of
    # |a||b| so far), and the float8 tensor cores' reduced-precision adds.
    bound = np.abs(a.astype(np.float64)) @ np.abs(b64) * K * 2.0 ** -11 + 1e-2
    assert (np.abs(c - ref) <= bound).all(), np.max(np.abs(c - ref) / bound)
    rel = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    assert rel < 5e-3, rel


def _named_barrier_kernel(barrier_id=2, arrive_count=None):
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:  # noqa: F841
            S = T.alloc_shared((256,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx]
            T.sync_threads(barrier_id, arrive_count)
            B[tx] = S[255 - tx]

    return main


def test_sync_threads_with_a_barrier_id_is_a_named_barrier():
    """T.sync_threads(id[, count]) is bar.sync id, count (all the block's threads by
    default) and stands for the block-wide barrier the shared accesses need; without an
    id it is __syncthreads."""
    source = _C.codegen(_C.lower(_named_barrier_kernel(2).handle, SM90), SM90)
    assert "tl::named_barrier_sync(2, 256);" in source and "__syncthreads" not in source.split("named_barrier_sync(2")[1]
    assert "tl::named_barrier_sync(3, 128);" in _C.codegen(_C.lower(_named_barrier_kernel(3, 128).handle, SM90), SM90)
    plain = _C.codegen(_C.lower(_named_barrier_kernel(None).handle, SM90), SM90)
    assert "named_barrier_sync" not in plain and "__syncthreads();" in plain
    _sass(_named_barrier_kernel(2))  # assembles


@pytest.mark.parametrize("args, error, message", [
    ((0,), "TileLangShapeError", "barrier_id must be in 1..15"),
    ((16,), "TileLangShapeError", "barrier_id must be in 1..15"),
    ((2, 48), "TileLangShapeError", "arrive_count must be a multiple of 32 in 32..256"),
    ((2, 512), "TileLangShapeError", "arrive_count must be a multiple of 32 in 32..256"),
    ((None, 64), "TileLangTypeError", "arrive_count needs a barrier_id"),
    ((1.5,), "TileLangTypeError", "barrier_id must be an int"),
])
def test_sync_threads_checks_its_arguments(args, error, message):
    with pytest.raises(getattr(tilelang.errors, error), match=message) as e:
        _named_barrier_kernel(*args)
    assert "test_hopper.py" in str(e.value)


def test_warp_specialisation_takes_a_named_barrier_the_kernel_leaves_free():
    """The consumers' block-wide barriers become a named barrier whose id the kernel's own
    T.sync_threads calls do not use."""
    import tilelang.language as T
    M = N = K = 256

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 128, M // 128, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            C_s = T.alloc_shared((128, 128), "float16")
            T.clear(C_f)
            for k in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C_s)
            T.sync_threads(1)
            T.copy(C_s, C[by * 128, bx * 128])

    lowered = _C.lower(main.handle, SM90)
    assert "warp specialised" in lowered.lowering_report()
    source = _C.codegen(lowered, SM90)
    ids = {int(x) for x in __import__("re").findall(r"named_barrier_sync\((\d+), 256\)", source)}
    assert 1 in ids and len(ids) >= 2, ids  # the kernel's own 1 and the pass's other one


@pytest.mark.parametrize("causal", [False, True])
def test_attention_pv_runs_one_iteration_behind(causal):
    """The attention loop's last T.gemm (O += P V) runs one iteration behind, without waiting:
    iteration k issues S = Q K^T, then the O update and P V of iteration k - 1, waits for the
    first group only (wait_group 1), runs the softmax, then waits for P V (wait_group 0,
    P's registers fenced) before it writes P again and releases the stage of k - 1; the last
    P V follows the loop. Where P V is the narrower multiply only; tl.disable_wgmma_overlap
    keeps the in-order loop."""
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    func = flash_attention_fwd(1, 2, 512, 64, causal, block_M=128, block_N=128, num_stages=2, threads=256)
    lowered = _C.lower(func.handle, SM90)
    report = lowered.lowering_report()
    assert "its last T.gemm runs one iteration behind, asynchronously" in report
    # Only where P V is the narrower multiply (head dim 64 against key tiles of 128).
    wide = flash_attention_fwd(1, 2, 512, 128, causal, block_M=128, block_N=128, num_stages=2, threads=256)
    assert "one iteration behind" not in _C.lower(wide.handle, SM90).lowering_report()
    assert "barrier protocol checked" in report
    source = _C.codegen(lowered, SM90)
    loop = source[source.index("for (int32_t k = 0;"):source.index("acc_o_staged")]
    order = [loop.index(x) for x in ("tl::wgmma_commit();", "if (k >= 1) {", "tl::wgmma_wait<1>();",
                                     "tl::wgmma_wait<0>();\n")]
    assert order == sorted(order), order
    release = loop.index("tl::mbarrier_arrive(")
    before = loop[:release]
    assert before.rindex("tl::wgmma_wait<0>();") < before.rindex("fence_operand(reinterpret_cast<int*>(&probs[0])")
    assert loop.index("*>(&probs[", release) > release  # P is written after the wait and the release
    assert loop.count("tl::wgmma_commit();") == 3  # two in the loop, the last P V after it
    # The wait for S leaves P V's registers (O, P) alone: touching them there made ptxas wait.
    first_wait = loop.index("tl::wgmma_wait<1>();")
    in_flight_wait = loop[first_wait:loop.index("} else {", first_wait)]
    assert "&scores[0]" in in_flight_wait and "&acc_o[0]" not in in_flight_wait and "probs" not in in_flight_wait
    # O's rescale is issued with P V (measured faster than at the end of its own iteration).
    in_loop = loop[:loop.rindex("tl::wgmma_commit();")]  # up to the last P V, after the loop
    assert in_loop.index("* rescale[") < in_loop.index("tl::wgmma_wait<1>();")
    sass, usage, _ = sass_of(func)
    assert "LDL" not in sass and "STL" not in sass
    plain = _C.lower(func.handle, SM90, ["tl.disable_wgmma_overlap"])
    assert "one iteration behind" not in plain.lowering_report()
    assert "tl::wgmma_wait<1>();" not in _C.codegen(plain, SM90)


def test_attention_stage_list_puts_pv_behind():
    """T.Pipelined's stage list (upstream's way to ask for P V one iteration behind, with
    groups of statements) is read per group; where P V is as wide as Q K^T (head dim 128)
    the in-order loop measured faster and is kept, and the report says so; a stage list
    that asks for nothing of the kind leaves the compiler's order."""
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    # Statements: K copy | clear, Q K^T | softmax (7) | O rescale | V copy | P V.
    groups = [[0], [1, 2], [3, 4, 5, 6, 7, 8, 9], [10], [11], [12]]
    asked = {"order": [-1, 0, 3, 1, -1, 2], "stage": [-1, 0, 0, 1, -1, 1], "group": groups}
    func = flash_attention_fwd(1, 2, 512, 64, False, block_M=128, block_N=128, num_stages=2, threads=256,
                               schedule=asked)
    report = _C.lower(func.handle, SM90).lowering_report()
    assert "its last T.gemm runs one iteration behind" in report and "as its stage list asks" in report, report
    wide = flash_attention_fwd(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2, threads=256,
                               schedule=asked)
    report = _C.lower(wide.handle, SM90).lowering_report()
    assert "one iteration behind" not in report
    assert "its stage list asks for the last T.gemm a stage behind: not done, measured slower" in report, report
    flat = dict(asked, stage=[-1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1, 1], order=list(range(13)))
    del flat["group"]
    assert "as its stage list asks" in _C.lower(flash_attention_fwd(
        1, 2, 512, 64, False, block_M=128, block_N=128, num_stages=2, threads=256, schedule=flat).handle,
        SM90).lowering_report()
    same = dict(asked, stage=[-1, 0, 0, 0, -1, 0])
    report = _C.lower(flash_attention_fwd(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2,
                                          threads=256, schedule=same).handle, SM90).lowering_report()
    assert "one iteration behind" not in report and "order/stage given" in report
    from tilelang.errors import TileLangTypeError
    with pytest.raises(TileLangTypeError, match="group puts statement 2 in groups 1 and 2"):
        flash_attention_fwd(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2, threads=256,
                            schedule=dict(asked, group=[[0], [1, 2], [2, 3], [10], [11], [12]]))
    with pytest.raises(TileLangTypeError, match="group has 5 groups but order / stage have 6 entries"):
        flash_attention_fwd(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2, threads=256,
                            schedule=dict(asked, group=groups[:5]))


def ptxas_wgmma_notes(source):
    """ptxas' notes on the wgmma code of a CUDA source compiled for sm_90a (C7510-C7517: a
    wait it injected, or every wgmma serialised); skips the test without NVRTC."""
    from sass import nvrtc_reason
    from tilelang.jit.kernel import _include_dir
    if nvrtc_reason():
        pytest.skip(f"NVRTC is not available: {nvrtc_reason()}")
    _, log = _C.nvrtc_compile(source, "kernel.cu", "sm_90a", [_include_dir()], False, True)
    return [line for line in log.splitlines() if "(C751" in line]


@pytest.mark.parametrize("dim", [64, 128])
def test_attention_warpgroups_take_turns_around_issue(dim):
    """With tl.enable_warpgroup_pingpong the loop takes FlashAttention-3's schedule: P V one
    iteration behind at any head dim, and the two consumer warpgroups take turns only to
    issue (S = Q K^T of this iteration, P V of the last); the turn is passed before the wait
    for S, inside both of its branches, so ptxas neither serialises the products nor waits
    where the compiler did not."""
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    on = ["tl.enable_warpgroup_pingpong"]
    func = flash_attention_fwd(1, 2, 512, dim, False, block_M=128, block_N=128, num_stages=2, threads=256)
    lowered = _C.lower(func.handle, SM90, on)
    report = lowered.lowering_report()
    assert "its last T.gemm runs one iteration behind" in report
    assert "take turns on the tensor cores (each turn issues one iteration's first wgmma group and the previous " \
        "iteration's last, and passes before waiting; named barriers" in report
    assert "barrier protocol checked" in report
    source = _C.codegen(lowered, SM90)
    loop = source[source.index("tl::warpgroup_turn_open("):source.index("tl::warpgroup_turn_close(")]
    commits = [i for i in range(len(loop)) if loop.startswith("tl::wgmma_commit();", i)]
    passes = [i for i in range(len(loop)) if loop.startswith("tl::warpgroup_turn_pass(", i)]
    assert len(commits) == 2 and len(passes) == 2 and loop.count("tl::warpgroup_turn_wait(") == 1
    assert loop.index("tl::warpgroup_turn_wait(") < commits[0] < commits[1] < passes[0]
    assert loop.index("tl::wgmma_wait<1>();") > passes[0] and loop.index("tl::wgmma_wait<0>();") > passes[1]
    # O's rescale runs at the end of its own iteration, after the last wait, so that a turn
    # only issues (before P V, with S = Q K^T in flight, ptxas waited there: C7517).
    assert loop.rindex("tl::wgmma_wait<0>();") < loop.rindex("* rescale[")  # the loop ends at turn_close
    assert ptxas_wgmma_notes(source) == []
    sass, _, _ = sass_of(func, on)
    hgmma, waits = len(re.findall(r"\bHGMMA\.", sass)), sass.count("WARPGROUP.DEPBAR")
    assert "LDL" not in sass and waits * 4 <= hgmma, (hgmma, waits)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_warpgroups_take_turns(causal):
    """Two consumer warpgroups that share no barrier in the loop take turns on the tensor
    cores: each wgmma group waits on its warpgroup's named barrier (BAR.SYNC) and passes the
    turn once committed (BAR.ARV); warpgroup 1 passes first and warpgroup 0 takes the last
    pass after the loop. Only with tl.enable_warpgroup_pingpong (measured slower so far); a
    GEMM's loop (wgmma alone) and one warpgroup are left as they are."""
    on = ["tl.enable_warpgroup_pingpong", "tl.disable_wgmma_overlap"]  # turns apply to the in-order loop
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    func = flash_attention_fwd(1, 2, 512, 128, causal, block_M=128, block_N=128, num_stages=2, threads=256)
    lowered = _C.lower(func.handle, SM90, on)
    assert "the two consumer warpgroups take turns on the tensor cores (each turn the last wgmma group of one " \
        "iteration and the first of the next, of 2 per iteration" in lowered.lowering_report()
    source = _C.codegen(lowered, SM90)
    loop = source[source.index("tl::warpgroup_turn_first("):source.index("tl::warpgroup_turn_last(")]
    assert loop.count("tl::warpgroup_turn_wait(") == 1 and loop.count("tl::warpgroup_turn_pass(") == 1
    # The pass follows the first group's commit; the wait comes before the last group.
    commits = [i for i in range(len(loop)) if loop.startswith("tl::wgmma_commit();", i)]
    assert len(commits) == 2
    assert commits[0] < loop.index("tl::warpgroup_turn_pass(") < loop.index("tl::warpgroup_turn_wait(") < commits[1]
    sass, usage, report = sass_of(func, on)
    assert "BAR.ARV" in sass and "BAR.SYNC" in sass and "LDL" not in sass
    off = _C.lower(func.handle, SM90, ["tl.disable_wgmma_overlap"])
    assert "take turns" not in off.lowering_report()
    assert "warpgroup_turn" not in _C.codegen(off, SM90)
    one = flash_attention_fwd(1, 2, 512, 64, causal, block_M=64, block_N=64, num_stages=2, threads=128)
    assert "take turns" not in _C.lower(one.handle, SM90, on).lowering_report()
    gemm = matmul(1024, 1024, 1024, block_M=128, block_N=256, block_K=64, in_dtype="bfloat16", num_stages=3,
                  threads=256)
    assert "take turns" not in _C.lower(gemm.handle, SM90, on).lowering_report()


# (block_M, block_N, num_stages, threads, causal): the attention kernel's Hopper forms; the
# causal trip count is a let (bx + 1) around the pipelined loop, so the statements around
# that scope must also run on the consumer threads only.
ATTENTION_CASES = [(64, 64, 2, 128, True), (64, 64, 2, 128, False), (128, 128, 2, 256, True),
                   (128, 64, 2, 256, False), (128, 128, 2, 256, False, 64), (128, 128, 2, 256, True, 64),
                   (128, 128, 3, 256, True, 64)]


def test_statements_around_a_warp_specialised_scope_run_on_the_consumers():
    """The causal kernel's query-tile load (lowered for the kernel's 128 threads, the
    consumers' own copy with tl.disable_producer_tile_loads) sits before the let that holds
    the pipelined loop: it is guarded by tx < 128, so the extra producer warpgroup does not
    run it with thread indices past the tile."""
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    source = _C.codegen(_C.lower(flash_attention_fwd(1, 2, 512, 128, True, block_M=64, block_N=64, num_stages=2,
                                                     threads=128).handle, SM90, [CONSUMER_TILE_LOADS]), SM90)
    body = source[source.index("tl_dyn_smem[];"):]
    first_q_store = body.index("&Q_shared[")
    assert "if (tx < 128) {" in body[:first_q_store], body[:first_q_store][-400:]


@pytest.mark.parametrize("causal", [False, True])
def test_shared_writes_before_the_loop_are_published_before_the_roles_split(causal):
    """The query tile, written by the consumer threads with ordinary stores (their own copy
    with tl.disable_producer_tile_loads) and read by wgmma: its stores come before the
    fence.proxy.async and block-wide barrier of the pipeline's set-up, not after them inside
    the consumers' branch."""
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    source = _C.codegen(_C.lower(flash_attention_fwd(1, 2, 512, 128, causal, block_M=128, block_N=128, num_stages=2,
                                                     threads=256).handle, SM90, [CONSUMER_TILE_LOADS]), SM90)
    q_store = source.index("*>(&Q_shared[")  # the stores of the tile (vector stores)
    published = source.index("tl::fence_proxy_async();\n  __syncthreads();\n  if (tx == 0) {\n    tl::mbarrier_init")
    assert q_store < published < source.index("tl::set_max_nreg<")


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=lambda c: "x".join(map(str, c[:4])) + ("-causal" if c[4] else "") +
                         (f"-d{c[5]}" if len(c) > 5 else ""))
def test_attention_on_the_hopper_path_numerics(target, rng, case):
    _gpu_only(target)
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    from test_kernels import _attention_reference
    bm, bn, stages, threads, causal = case[:5]
    d = case[5] if len(case) > 5 else 128  # head dim 64: P V runs one iteration behind
    b, h, s = 2, 2, 512
    kernel = tilelang.compile(flash_attention_fwd(b, h, s, d, causal, block_M=bm, block_N=bn, num_stages=stages,
                                                  threads=threads), out_idx=[3], target=target)
    assert hopper_path_forced_off() or "warp specialised" in kernel.get_lowering_report()
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float16) for _ in range(3))
    out = np.asarray(kernel(q, k, v)).astype(np.float64)
    ref = _attention_reference(q, k, v, causal)
    np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2)
    # fp16 outputs of float32 arithmetic: a race (a tile read before all its writes) shows
    # as a relative error far above the rounding's ~1e-4.
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert rel < 1e-3, rel


@pytest.mark.parametrize("dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_warpgroup_turns_numerics(target, rng, dim, causal):
    """FlashAttention-3's schedule (tl.enable_warpgroup_pingpong: P V one iteration behind,
    turns to issue) against the reference, with trip counts that differ per block (causal)."""
    _gpu_only(target)
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from kernels.attention import flash_attention_fwd
    from test_kernels import _attention_reference
    b, h, s = 2, 2, 640
    kernel = tilelang.compile(flash_attention_fwd(b, h, s, dim, causal, block_M=128, block_N=128, num_stages=2,
                                                  threads=256), out_idx=[3], target=target,
                              pass_configs={"tl.enable_warpgroup_pingpong": True})
    assert hopper_path_forced_off() or "take turns" in kernel.get_lowering_report()
    q, k, v = (rng.standard_normal((b, s, h, dim)).astype(np.float16) for _ in range(3))
    out = np.asarray(kernel(q, k, v)).astype(np.float64)
    ref = _attention_reference(q, k, v, causal)
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert rel < 1e-3, rel


def paged_sum(mode, pages=16):
    """O = the sum of 16 pages of K (64 x 64 each), taken in the order of a block table; the
    page of iteration t is addressed inline, through a name bound in the loop, or read from
    the table (a paged KV cache)."""
    import tilelang.language as T

    @T.prim_func
    def main(K: T.Tensor((pages * 2, 64, 64), "float16"), table: T.Tensor((pages,), "int32"),
             O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            K_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for t in T.Pipelined(pages, num_stages=3):
                if mode == "table":
                    T.copy(K[table[t], 0:64, 0:64], K_s)
                elif mode == "let":
                    p = t * 2
                    T.copy(K[p, 0:64, 0:64], K_s)
                else:
                    T.copy(K[t * 2, 0:64, 0:64], K_s)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += K_s[i, j]
            T.copy(acc, O)

    return main


@pytest.mark.parametrize("mode", ["inline", "let", "table"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_copies_addressed_through_names_and_tables_are_issued_ahead(mode, arch):
    """A copy whose address goes through a name bound in the loop (`p = t * 2`) or a tensor
    the kernel never writes (a block table) is issued ahead like one written inline (it ran
    in order before, with only a report line)."""
    report = _C.lower(paged_sum(mode).handle, f"cuda -arch={arch}").lowering_report()
    assert "runs in order" not in report
    assert ("copies by cp.async" if arch == "sm_90a" else "pipelined: 2 copies ahead") in report


@pytest.mark.parametrize("mode", ["let", "table"])
def test_copies_through_names_and_tables_numerics(target, rng, mode):
    _gpu_only(target)
    kernel = tilelang.compile(paged_sum(mode), out_idx=[2], target=target)
    k = rng.uniform(-1, 1, (32, 64, 64)).astype(np.float16)
    table = rng.permutation(32)[:16].astype(np.int32) if mode == "table" else np.zeros(16, np.int32)
    pages = table if mode == "table" else np.arange(16) * 2
    expected = k[pages].astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(np.asarray(kernel(k, table)), expected, rtol=1e-3, atol=1e-2)


def rows_scaled_through_shared(rows, cols, pipelined=False):
    """Each block reads `rows` rows into a shared tile, scales them in place by their own
    sum of squares and stores the tile: the shape of upstream's layer norm (one row of 8192
    bf16 values), either once or in a pipelined loop over blocks of rows."""
    import tilelang.language as T
    n = rows * 4

    @T.prim_func
    def main(X: T.Tensor((n, cols), "bfloat16"), Y: T.Tensor((n, cols), "bfloat16")):
        with T.Kernel(1 if pipelined else 4, threads=256) as bx:
            S = T.alloc_shared((rows, cols), "bfloat16")
            F = T.alloc_fragment((rows, cols), "float32")
            ss = T.alloc_fragment((rows,), "float32")
            for t in T.Pipelined(4 if pipelined else 1, num_stages=2 if pipelined else 0):
                T.copy(X[(bx + t) * rows, 0], S)
                for i, j in T.Parallel(rows, cols):
                    F[i, j] = T.Cast("float32", S[i, j]) * T.Cast("float32", S[i, j])
                T.reduce_sum(F, ss, dim=1)
                for i, j in T.Parallel(rows, cols):
                    S[i, j] = T.Cast("bfloat16", T.Cast("float32", S[i, j]) / T.sqrt(ss[i]))
                T.copy(S, Y[(bx + t) * rows, 0])

    return main


@pytest.mark.parametrize("rows, cols, tma", [(1, 8192, False), (2, 1024, False), (8, 1024, True), (1, 64, True)])
def test_tma_moves_wide_rows_only_in_whole_swizzle_atoms(rows, cols, tma):
    """TMA moves a row wider than 128 bytes in swizzled panels whose hardware swizzle comes
    from each panel's shared address: whole when the tile has a multiple of 8 rows, but a
    1-row tile's panels would be swizzled by their position and read by the threads as a
    plain row (upstream's layer norm came out 87% wrong so). Such tiles are moved by the
    threads, loads and stores alike."""
    for pipelined in (False, True):
        src = _C.codegen(_C.lower(rows_scaled_through_shared(rows, cols, pipelined).handle, SM90), SM90)
        assert ("tl::tma_store(" in src) == tma, src
        if not tma:
            assert "tl::tma_load(" not in src


@pytest.mark.parametrize("rows, cols", [(1, 8192), (8, 1024), (1, 64)])
@pytest.mark.parametrize("pipelined", [False, True])
def test_wide_rows_through_shared_numerics(target, rng, rows, cols, pipelined):
    _gpu_only(target)
    kernel = tilelang.compile(rows_scaled_through_shared(rows, cols, pipelined), out_idx=[1], target=target)
    x = rng.standard_normal((rows * 4, cols)).astype(ml_dtypes.bfloat16)
    xf = x.astype(np.float64)
    expected = xf / np.sqrt((xf * xf).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(np.asarray(kernel(x)).astype(np.float64), expected, rtol=2e-2, atol=1e-3)


def test_ptxas_notes_on_wgmma_become_report_lines():
    # ptxas' notes in NVRTC's log: serialised wgmma is a slower path (warned once), an
    # injected wait a plain note; other messages are not reported.
    from tilelang.jit.backends import ptxas_notes
    log = ("k.cu(22): warning #177-D: variable \"x\" was declared but never referenced\n"
           "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
           "insufficient register resources for the function 'main_kernel'\n"
           "ptxas info    : (C7517) warpgroup.wait is injected in around line 497 by compiler to allow use of "
           "registers defined by GMMA in function 'main_kernel'\n")
    notes = ptxas_notes(log, "kern.py:12")
    assert notes == [
        "kern.py:12: ptxas serialised the kernel's wgmma instructions (insufficient register resources) [slower path: "
        "each wgmma waits for the one before; fewer registers live across the products (smaller tiles, fewer "
        "fragments) or accumulators written only by T.gemm avoid it]",
        "kern.py:12: ptxas waits for the wgmma groups in flight before registers one of them wrote are used (a wait "
        "the compiler did not place)"], notes
    assert ptxas_notes("ptxas info    : Used 168 registers, used 2 barriers\n", "kern.py:12") == []


def test_nvrtc_log_of_a_gemm_has_no_wgmma_note():
    from tilelang.jit.backends import ptxas_notes
    from sass import _include_dir, nvrtc_reason
    if nvrtc_reason():
        pytest.skip(f"NVRTC is not available: {nvrtc_reason()}")
    f = matmul(1024, 1024, 1024, 128, 256, 64, in_dtype="bfloat16", num_stages=3, threads=256)
    _, log = _C.nvrtc_compile(_C.codegen(_C.lower(f.handle, SM90), SM90), "k.cu", "sm_90a", [_include_dir()],
                              False, True)
    assert ptxas_notes(log, "k.py:1") == [], log
