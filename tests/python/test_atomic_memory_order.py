"""T.atomic_add / atomic_max / atomic_min(..., memory_order=...): the order is honoured, not
dropped. The last block of a grid to count itself done (an acq_rel count) reads every
block's partial result; the CUDA source fences each ordered atomic on the right side;
WebGPU, whose atomics are relaxed, rejects an order; a bad order is a typed error."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError, TileLangUnsupportedError

from sass import sass_of

SM90 = "cuda -arch=sm_90a"


def last_block_sum(blocks, per, order="acq_rel"):
    """Each block sums its slice into Partial and counts itself done; the last block to
    count sums the partial results into Total and resets the counter for the next launch."""

    @T.prim_func
    def last_block(A: T.Tensor((blocks * per,), "float32"), Partial: T.Tensor((blocks,), "float32"),
                   Count: T.Tensor((1,), "int32"), Total: T.Tensor((1,), "float32")):
        with T.Kernel(blocks, threads=64) as bx:
            part = T.alloc_shared((per,), "float32")
            every = T.alloc_shared((blocks,), "float32")
            s = T.alloc_fragment((1,), "float32")
            done_before = T.alloc_shared((1,), "int32")
            T.copy(A[bx * per:(bx + 1) * per], part)
            T.reduce_sum(part, s, dim=0)
            T.copy(s, Partial[bx:bx + 1])
            T.sync_threads()  # every thread's writes before the count (a no-op on the CPU)
            for i in T.Parallel(1):
                done_before[i] = T.atomic_add(Count[0], 1, return_prev=True, memory_order=order)
            if done_before[0] == blocks - 1:
                T.copy(Partial, every)
                T.reduce_sum(every, s, dim=0)
                T.copy(s, Total)
                Count[0] = 0

    return last_block


def test_last_block_reads_every_partial(target, rng):
    blocks, per = 61, 256
    if target == "webgpu":
        with pytest.raises(TileLangUnsupportedError, match="with a memory order"):
            tilelang.compile(last_block_sum(blocks, per), target=target)
        return
    k = tilelang.compile(last_block_sum(blocks, per), target=target)
    count = np.zeros(1, np.int32)
    for _ in range(4):  # the last block resets the counter: launches follow one another
        a = rng.standard_normal(blocks * per).astype(np.float32)
        partial = np.zeros(blocks, np.float32)
        total = np.zeros(1, np.float32)
        k(a, partial, count, total)
        assert count[0] == 0
        np.testing.assert_allclose(partial, a.reshape(blocks, per).astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(total[0], a.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("order, code, before, after", [
    (None, 0, False, False),
    ("relaxed", 0, False, False),
    ("consume", 1, False, True),
    ("acquire", 2, False, True),
    ("release", 3, True, True),
    ("acq_rel", 4, True, True),
    ("seq_cst", 5, True, True),
])
def test_cuda_source_fences_the_atomic(order, code, before, after):
    source = _C.codegen(_C.lower(last_block_sum(8, 64, order).handle, SM90, []), SM90)
    call = "tl::atomic_add(&Count[0], 1)"
    assert call in source
    if code == 0:
        assert "atomic_fence" not in source
    else:
        assert f"(tl::atomic_fence_before<{code}>(), tl::atomic_fence_after<{code}>({call}))" in source


@pytest.mark.parametrize("order, fence_before, fence_after", [
    ("relaxed", False, False), ("acquire", False, True), ("release", True, False), ("acq_rel", True, True)])
def test_sass_fences_on_the_right_side(order, fence_before, fence_after):
    # In the machine code: a device-scope fence before an atomic that releases (the block's
    # partial result visible before the count), after one that acquires (the count seen
    # before the other blocks' partial results are read).
    sass, _, _ = sass_of(last_block_sum(8, 64, order))
    lines = [ln for ln in sass.splitlines() if "MEMBAR" in ln or "ATOMG" in ln or "BAR.SYNC" in ln]
    atom = next(i for i, ln in enumerate(lines) if "ATOMG" in ln)
    assert ("MEMBAR" in lines[atom - 1]) == fence_before, lines
    assert ("MEMBAR" in lines[atom + 1]) == fence_after, lines


def test_tile_atomic_orders_every_element():
    # The tile form: each element's atomic is fenced (release here: before it only).
    @T.prim_func
    def tile_max(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            T.atomic_max(B[0:128], A[0:128], memory_order="release")

    source = _C.codegen(_C.lower(tile_max.handle, SM90, []), SM90)
    assert "(tl::atomic_fence_before<3>(), tl::atomic_fence_after<3>(tl::atomic_max(&B[" in source


def test_tile_atomic_with_order_runs(target, rng):
    @T.prim_func
    def tile_add(A: T.Tensor((8, 128), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            T.atomic_add(B[0:128], A[bx, 0:128], memory_order="seq_cst")

    if target == "webgpu":
        with pytest.raises(TileLangUnsupportedError, match="memory order"):
            tilelang.compile(tile_add, target=target)
        return
    k = tilelang.compile(tile_add, target=target)
    a = rng.standard_normal((8, 128)).astype(np.float32)
    b = np.zeros(128, np.float32)
    k(a, b)
    np.testing.assert_allclose(b, a.sum(0), rtol=1e-5, atol=1e-5)


def test_unknown_memory_order_is_a_type_error():
    with pytest.raises(TileLangTypeError, match=r"memory_order='acq'\): not a memory order") as e:
        @T.prim_func
        def bad(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64) as bx:
                T.atomic_add(A[0], 1, memory_order="acq")
    assert "'acq_rel'" in str(e.value)


def test_tma_reduction_takes_no_memory_order():
    with pytest.raises(TileLangTypeError, match="a TMA reduction is an asynchronous bulk operation"):
        @T.prim_func
        def bad(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((64, 64), "float32")
                T.copy(A, S)
                T.atomic_add(B, S, use_tma=True, memory_order="release")


def published_sum(blocks, per, store_order="release", load_order="acquire"):
    """Each block publishes its partial sum by T.atomic_store and sets its bit of Seen by
    T.atomic_or; the block that completes the set (an acq_rel count) reads every partial
    by T.atomic_load and writes the total."""

    @T.prim_func
    def published(A: T.Tensor((blocks * per,), "float32"), Partial: T.Tensor((blocks,), "float32"),
                  Seen: T.Tensor((1,), "int32"), Count: T.Tensor((1,), "int32"), Total: T.Tensor((1,), "float32")):
        with T.Kernel(blocks, threads=32) as bx:
            part = T.alloc_shared((per,), "float32")
            s = T.alloc_fragment((1,), "float32")
            done_before = T.alloc_shared((1,), "int32")
            total = T.alloc_var("float32")
            T.copy(A[bx * per:(bx + 1) * per], part)
            T.reduce_sum(part, s, dim=0)
            for i in T.Parallel(1):
                T.atomic_store(Partial[bx], s[0], memory_order=store_order)
                T.atomic_or(Seen[0], 1 << bx)
                done_before[i] = T.atomic_add(Count[0], 1, return_prev=True, memory_order="acq_rel")
            if done_before[0] == blocks - 1:
                total = 0
                for k in T.serial(blocks):
                    total += T.atomic_load(Partial[k], memory_order=load_order)
                Total[0] = total
                Count[0] = 0

    return published


def test_atomic_load_store_or(target, rng):
    blocks, per = 30, 64
    if target == "webgpu":
        with pytest.raises(TileLangUnsupportedError, match="T.atomic_store with a memory order other than relaxed"):
            tilelang.compile(published_sum(blocks, per), target=target)
        return
    k = tilelang.compile(published_sum(blocks, per), target=target)
    a = rng.standard_normal(blocks * per).astype(np.float32)
    partial, seen, count, total = (np.zeros(blocks, np.float32), np.zeros(1, np.int32), np.zeros(1, np.int32),
                                   np.zeros(1, np.float32))
    k(a, partial, seen, count, total)
    assert seen[0] == (1 << blocks) - 1 and count[0] == 0
    np.testing.assert_allclose(partial, a.reshape(blocks, per).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total[0], a.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


def test_atomic_load_store_cuda_source():
    source = _C.codegen(_C.lower(published_sum(8, 64).handle, SM90, []), SM90)
    assert "tl::atomic_store<3>(&Partial[bx], " in source
    assert "tl::atomic_or(&Seen[0], " in source
    assert "tl::atomic_load<2>(&Partial[k])" in source
    sass, _, _ = sass_of(published_sum(8, 64))
    assert "RED.E.OR" in sass or "ATOMG.E.OR" in sass, sass


@pytest.mark.parametrize("call, message", [
    (lambda F: T.atomic_load(F[0], memory_order="release"), r"memory_order='release'\): not an order of T.atomic_load"),
    (lambda F: T.atomic_store(F[0], 1, memory_order="acquire"), r"memory_order='acquire'\): not an order of T.atomic_store"),
    (lambda F: T.atomic_or(F, 1), "T.atomic_or updates one element"),
])
def test_atomic_load_store_or_errors(call, message):
    with pytest.raises(TileLangTypeError, match=message):
        @T.prim_func
        def bad(F: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                F[1] = call(F)


def test_relaxed_atomic_load_store_and_or_in_one_block(target, rng):
    # WebGPU's atomicLoad / atomicStore / atomicOr (relaxed), float32 through its bits.
    @T.prim_func
    def relaxed(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), Bits: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                T.atomic_store(B[i], T.atomic_load(A[i], memory_order="relaxed") * 3, memory_order="relaxed")
                T.atomic_or(Bits[i // 32], 1 << (i % 32))

    k = tilelang.compile(relaxed, target=target)
    a = rng.standard_normal(64).astype(np.float32)
    b, bits = np.zeros_like(a), np.zeros(2, np.int32)
    k(a, b, bits)
    np.testing.assert_allclose(b, a * 3, rtol=1e-6)
    np.testing.assert_array_equal(bits, [-1, -1])
