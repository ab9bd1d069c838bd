"""T.atomic_add(G[region], shared_tile, use_tma=True): on sm_90a one TMA reduction
(cp.reduce.async.bulk.tensor .add) of the tile into the tensor, issued by one thread, as
FlashAttention-3 accumulates dQ; where TMA cannot take it (an element type it cannot add,
another target) an atomic per element, said in the lowering report. Numerics on every
target (the CPU and webgpu add element by element), the CUDA path read without a GPU."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangTypeError

from sass import sass_of
from sm90 import require_sm90

SM90 = "cuda -arch=sm_90a"


def accumulate(dtype="float32", use_tma=True, rows=256, cols=64, splits=4):
    """Block (bx, s) adds 2 * A[bx rows] into dQ[bx rows]: splits blocks add into each tile."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), dtype), dQ: T.Tensor((rows, cols), dtype)):
        with T.Kernel(rows // 64, splits, threads=128) as (bx, s):
            S = T.alloc_shared((64, cols), dtype)
            F = T.alloc_fragment((64, cols), dtype)
            for j in T.serial(2):
                T.copy(A[bx * 64, 0], F)
                T.copy(F, S)
                T.atomic_add(dQ[bx * 64:(bx + 1) * 64, :], S, use_tma=use_tma)

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_tma_reduction_in_the_cuda_source(dtype):
    lowered = _C.lower(accumulate(dtype).handle, SM90)
    report = lowered.lowering_report()
    assert "T.atomic_add S -> dQ by TMA reduction (cp.reduce.async.bulk.tensor .add, boxes of 64 x" in report, report
    source = _C.codegen(lowered, SM90)
    issue = source[source.index("if (tx == 0) {"):]
    assert "tl::tma_reduce_add(dQ_tmap0, &S[0], 0, bx * 64);" in issue, source
    assert issue.index("tl::tma_store_commit();") < issue.index("tl::tma_store_wait_read<0>();")
    # The threads' writes to the tile are fenced for the async proxy before the barrier
    # that hands it to the issuing thread; dQ is written (not a const parameter).
    before = source[:source.index("if (tx == 0) {")]
    assert before.rstrip().endswith("tl::fence_proxy_async();\n    __syncthreads();".rstrip()), before[-200:]
    assert "const float* __restrict__ dQ" not in source and "const __half* __restrict__ dQ" not in source


def test_tma_reduction_sass():
    sass, _, report = sass_of(accumulate("float32"))
    assert "UTMAREDG" in sass, [l for l in sass.splitlines() if "UTMA" in l or "RED" in l]
    assert "RED.E.ADD" not in sass and "ATOM" not in sass


def test_without_use_tma_the_adds_are_atomics():
    lowered = _C.lower(accumulate("float32", use_tma=False).handle, SM90)
    assert "TMA reduction" not in lowered.lowering_report()
    assert "tma_reduce_add" not in _C.codegen(lowered, SM90)


def test_a_type_tma_cannot_add_is_a_reported_slower_path():
    lowered = _C.lower(accumulate("int32").handle, SM90)
    assert ("T.atomic_add into dQ by an atomic per element [slower path: use_tma=True asks for one TMA reduction, "
            "but TMA adds float16, bfloat16 and float32, not int32]") in lowered.lowering_report()


def test_one_element_with_use_tma_is_a_type_error():
    with pytest.raises(TileLangTypeError, match=r"use_tma=True\) adds a shared tile into a region of a tensor"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.atomic_add(A[0], 1.0, use_tma=True)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_accumulated_tiles_match_numpy(target, dtype):
    """Four blocks add each row tile twice: dQ = 8 * A (on sm_90a by TMA reductions)."""
    if target.startswith("cuda"):
        require_sm90(target)
    a = np.random.default_rng(9).integers(-4, 4, (256, 64)).astype(dtype)
    dq = np.zeros((256, 64), dtype)
    kernel = tilelang.compile(accumulate(dtype), target=target)
    if target.startswith("cuda"):
        import torch
        a_t, dq_t = torch.tensor(a, device="cuda"), torch.zeros((256, 64), dtype=getattr(torch, dtype), device="cuda")
        kernel(a_t, dq_t)
        dq = dq_t.cpu().numpy()
    else:
        kernel(a, dq)
    np.testing.assert_array_equal(dq, 8 * a)


def test_a_tensor_with_a_layout_by_hand_keeps_its_atomics():
    """The tensor is addressed through the user's T.Layout; a TMA box would be row-major."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), dQ: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({dQ: T.Layout(dQ.shape, lambda i, j: [j, i])})
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A, S)
            T.atomic_add(dQ[0:64, :], S, use_tma=True)

    report = _C.lower(main.handle, SM90).lowering_report()
    assert ("T.atomic_add into dQ by an atomic per element [slower path: use_tma=True asks for one TMA reduction, "
            "but 'dQ' has a layout by hand (T.annotate_layout with T.Layout)]") in report, report


def reordered_accumulate(use_tma=True, batch=2, seq=128, heads=4, dim=64, block=64):
    """dQ declared [batch, seq, heads, dim] but stored [batch, heads, seq, dim] (a layout by
    hand, as upstream's GQA backward stores it for TMA): each block adds its tile twice; a
    second kernel reads it back through the layout."""
    shape = (batch, seq, heads, dim)

    @T.prim_func
    def add(A: T.Tensor(shape, "float32"), dQ: T.Tensor(shape, "float32")):
        with T.Kernel(seq // block, heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: T.Layout(dQ.shape, lambda b, l, h, d: [b, h, l, d])})
            S = T.alloc_shared((block, dim), "float32")
            for j in T.serial(2):
                T.copy(A[bz, bx * block:(bx + 1) * block, by, :], S)
                T.atomic_add(dQ[bz, bx * block:(bx + 1) * block, by, :], S, use_tma=use_tma)

    @T.prim_func
    def read(dQ: T.Tensor(shape, "float32"), Out: T.Tensor(shape, "float32")):
        with T.Kernel(seq // block, heads, batch, threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: T.Layout(dQ.shape, lambda b, l, h, d: [b, h, l, d])})
            T.copy(dQ[bz, bx * block:(bx + 1) * block, by, :], Out[bz, bx * block:(bx + 1) * block, by, :])

    return add, read


def test_tma_reduction_into_a_tensor_stored_in_another_order():
    add, _ = reordered_accumulate()
    lowered = _C.lower(add.handle, SM90)
    assert "T.atomic_add S -> dQ by TMA reduction" in lowered.lowering_report()
    source = _C.codegen(lowered, SM90)
    # Coordinates innermost first in the stored order (d, l, h, b); the map's box likewise.
    assert "tl::tma_reduce_add(dQ_tmap0, &S[0], 0, bx * 64, by, bz);" in source, source
    maps = [p for info in _C.cuda_kernel_infos(lowered) for p in info["params"] if p[0] == "tensormap"]
    assert [(p[1], p[4], p[6]) for p in maps if p[1].startswith("dQ")] == [("dQ_tmap0", (1, 1, 64, 32), (0, 2, 1, 3))]


def test_tensor_map_of_a_reordered_tensor_describes_the_stored_order():
    from tilelang.jit.backends import _TensorMapParam

    class Declared:
        shape = [_C.const(e, "int32") for e in (2, 128, 4, 64)]
        strides = None

    param = ("tensormap", "dQ_tmap0", "float32", 0, (1, 1, 64, 32), 128, (0, 2, 1, 3))
    m = _TensorMapParam(0, param, [Declared()])
    assert m._layout({}) == ((2, 4, 128, 64), (4 * 128 * 64, 128 * 64, 64, 1))
    plain = _TensorMapParam(0, param[:6], [Declared()])  # an entry cached before the order was kept
    assert plain._layout({}) == ((2, 128, 4, 64), (128 * 4 * 64, 4 * 64, 64, 1))


def test_reordered_tensor_accumulates_like_numpy(target):
    if target.startswith("cuda"):
        require_sm90(target)
    add, read = reordered_accumulate()
    a = np.random.default_rng(12).integers(-4, 4, (2, 128, 4, 64)).astype(np.float32)
    if target.startswith("cuda"):
        import torch
        a_t = torch.tensor(a, device="cuda")
        dq, out = torch.zeros_like(a_t), torch.zeros_like(a_t)
        tilelang.compile(add, target=target)(a_t, dq)
        tilelang.compile(read, target=target)(dq, out)
        out = out.cpu().numpy()
    else:
        dq, out = np.zeros_like(a), np.zeros_like(a)
        tilelang.compile(add, target=target)(a, dq)
        tilelang.compile(read, target=target)(dq, out)
        # the storage is [batch, heads, seq, dim]
        np.testing.assert_array_equal(dq.reshape(2, 4, 128, 64), 2 * a.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(out, 2 * a)
