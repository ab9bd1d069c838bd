"""Small names of upstream's T: T.continue_loop and T.break_loop in serial and while loops,
T.cdiv, T.align_up, T.likely, T.fabs, T.fmul and T.index_to_coordinates, each run against
numpy; T.continue_loop where it cannot go is a syntax error."""

import re
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangSyntaxError


def test_continue_and_break(target, rng):
    # Row r of Out: the sum of A[r, k] over the k < Stop[r] whose A[r, k] is not negative,
    # by a T.serial loop that skips negatives (continue) and stops at Stop[r] (break); the
    # same count by a while loop.
    @T.prim_func
    def skip(A: T.Tensor((8, 16), "float32"), Stop: T.Tensor((8,), "int32"), Out: T.Tensor((8, 2), "float32")):
        with T.Kernel(8, threads=1) as r:
            total = T.alloc_var("float32")
            count = T.alloc_var("int32")
            k = T.alloc_var("int32")
            total = 0
            for j in T.serial(16):
                if j >= Stop[r]:
                    T.break_loop()
                if A[r, j] < 0:
                    T.continue_loop()
                total += A[r, j]
            count = 0
            k = -1
            while k < 15:
                k += 1
                if A[r, k] < 0:
                    T.continue_loop()
                count += 1
            Out[r, 0] = total
            Out[r, 1] = count

    k = tilelang.compile(skip, target=target)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    stop = rng.integers(0, 17, 8).astype(np.int32)
    out = np.zeros((8, 2), np.float32)
    k(a, stop, out)
    mask = (a >= 0) & (np.arange(16)[None, :] < stop[:, None])
    np.testing.assert_allclose(out[:, 0], (a * mask).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[:, 1], (a >= 0).sum(1))


def test_continue_in_a_parallel_loop_is_a_syntax_error():
    with pytest.raises(TileLangSyntaxError, match=r"T.continue_loop\(\) inside a T.Parallel loop"):
        @T.prim_func
        def bad(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                for i in T.Parallel(16):
                    if A[i] < 0:
                        T.continue_loop()
                    A[i] = 1


def test_arithmetic_helpers(target, rng):
    @T.prim_func
    def helpers(A: T.Tensor((64,), "float32"), N: T.Tensor((64,), "int32"), Out: T.Tensor((64, 5), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                Out[i, 0] = T.cdiv(N[i], 8)
                Out[i, 1] = T.align_up(N[i], 16)
                Out[i, 2] = T.fabs(A[i]) * T.if_then_else(T.likely(A[i] > -100), 1.0, 0.0)
                Out[i, 3] = T.fmul(A[i], 3.0)
                coords = T.index_to_coordinates(N[i], (4, 5, 6))
                Out[i, 4] = coords[0] * 100 + coords[1] * 10 + coords[2]

    k = tilelang.compile(helpers, target=target)
    a = rng.standard_normal(64).astype(np.float32)
    n = rng.integers(0, 120, 64).astype(np.int32)
    out = np.zeros((64, 5), np.float32)
    k(a, n, out)
    np.testing.assert_array_equal(out[:, 0], -(-n // 8))
    np.testing.assert_array_equal(out[:, 1], -(-n // 16) * 16)
    np.testing.assert_allclose(out[:, 2], np.abs(a), rtol=1e-6)
    np.testing.assert_allclose(out[:, 3], a * 3, rtol=1e-6)
    c0, rest = np.divmod(n, 30)
    c1, c2 = np.divmod(rest, 6)
    np.testing.assert_array_equal(out[:, 4], c0 * 100 + c1 * 10 + c2)
    assert T.cdiv(10, 4) == 3 and T.align_up(10, 4) == 12 and T.index_to_coordinates(29, (4, 5, 6)) == [0, 4, 5]


def test_continue_reaches_cuda():
    @T.prim_func
    def odd_sum(A: T.Tensor((32,), "int32"), Out: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            total = T.alloc_var("int32")
            total = 0
            for j in T.serial(32):
                if A[j] % 2 == 0:
                    T.continue_loop()
                total += A[j]
            Out[0] = total

    from tilelang import _C
    source = _C.codegen(_C.lower(odd_sum.handle, "cuda -arch=sm_90a"), "cuda -arch=sm_90a")
    assert "continue;" in source


def running_max(M, N, dim, reverse, scope, dtype):
    @T.prim_func
    def cmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=64) as bx:
            if scope == "fragment":
                t = T.alloc_fragment((M, N), dtype)
            else:
                t = T.alloc_shared((M, N), dtype)
            T.copy(X, t)
            T.cummax(t, dim=dim, reverse=reverse)
            T.copy(t, Y)

    return cmax


def expected_running_max(x, dim, reverse):
    y = np.flip(x, dim) if reverse else x
    y = np.maximum.accumulate(y, axis=dim)
    return np.flip(y, dim) if reverse else y


@pytest.mark.parametrize("dim, reverse, scope, dtype", [
    (1, False, "fragment", "float32"), (0, True, "shared", "float32"), (1, True, "fragment", "int32"),
    (0, False, "fragment", "float16")])
def test_cummax(target, rng, dim, reverse, scope, dtype):
    k = tilelang.compile(running_max(16, 24, dim, reverse, scope, dtype), target=target)
    x = (rng.standard_normal((16, 24)) * 100).astype(dtype)
    y = np.zeros_like(x)
    k(x, y)
    np.testing.assert_array_equal(y, expected_running_max(x, dim, reverse))


def test_cummax_through_the_hip_emulation(rng):
    from hip_emulation import EmulatedKernel, toolchain_problem
    if toolchain_problem():
        pytest.skip(toolchain_problem())
    kernel = EmulatedKernel(running_max(16, 24, 1, True, "fragment", "float32"), "gfx942")
    x = rng.standard_normal((16, 24)).astype(np.float32)
    y = np.zeros_like(x)
    kernel(x, y)
    np.testing.assert_array_equal(y, expected_running_max(x, 1, True))


def test_transpose(target, rng):
    @T.prim_func
    def tr(X: T.Tensor((24, 40), "float32"), Y: T.Tensor((40, 24), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((24, 40), "float32")
            b = T.alloc_shared((40, 24), "float32")
            T.copy(X, a)
            T.transpose(a, b)
            T.copy(b, Y)

    k = tilelang.compile(tr, target=target)
    x = rng.standard_normal((24, 40)).astype(np.float32)
    y = np.zeros((40, 24), np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, x.T)


def test_cluster_helpers():
    from tilelang import _C

    @T.prim_func
    def clusters(Out: T.Tensor((6, 8, 5), "int32")):
        with T.Kernel(6, 8, threads=128, cluster_dims=(2, 4, 1)) as (bx, by):
            if T.get_thread_binding() == 0:
                Out[bx, by, 0] = T.get_cluster_id(0)
                Out[bx, by, 1] = T.get_cluster_id(1)
                Out[bx, by, 2] = T.get_cluster_size() * 100 + T.get_cluster_extent(0) * 10 + T.get_cluster_extent(1)
                Out[bx, by, 3] = len(T.get_cluster_ids()) + T.get_cluster_extents()[2] * 10
                Out[bx, by, 4] = T.get_cluster_dims()[1]

    source = _C.codegen(_C.lower(clusters.handle, "cuda -arch=sm_90a"), "cuda -arch=sm_90a")
    for text in ("= bx / 2;", "= by / 4;", "= 832;", "= 12;", "= 4;"):
        assert text in source, (text, source)


def test_named_barrier_arrive_and_match():
    from tilelang import _C
    from tilelang.jit.kernel import _include_dir
    from sass import nvrtc_reason

    @T.prim_func
    def handoff(A: T.Tensor((256,), "int32"), Out: T.Tensor((256,), "int32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "int32")
            if tx < 128:
                s[tx] = A[tx]
                T.named_barrier_arrive(1, 256)
            else:
                T.sync_threads(1, 256)
                Out[tx] = s[tx - 128] + T.popcount(T.match_any_sync(A[tx])) + T.match_all_sync(A[tx]) % 2

    source = _C.codegen(_C.lower(handoff.handle, "cuda -arch=sm_90a"), "cuda -arch=sm_90a")
    assert "tl::named_barrier_arrive(1, 256);" in source and "tl::named_barrier_sync(1, 256);" in source
    assert "tl::match_any_sync(4294967295u, A[tx_1])" in source
    if not nvrtc_reason():
        assert _C.nvrtc_compile(source, "h.cu", "sm_90a", [_include_dir()])[:4] == b"\x7fELF"
    with pytest.raises(tilelang.errors.TileLangShapeError, match="thread_count must be a multiple of 32"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64) as bx:
                T.named_barrier_arrive(1, 48)


def test_any_of_all_of_and_dtype_names(target, rng):
    @T.prim_func
    def flags(A: T.Tensor((16, 4), "int32"), Out: T.Tensor((16, 2), "int32")):
        with T.Kernel(16, threads=1) as bx:
            row = T.alloc_local((4,), T.int)
            for j in T.serial(4):
                row[j] = A[bx, j]
            T.assume(bx < 16)
            Out[bx, 0] = T.any_of(row)
            Out[bx, 1] = T.all_of(row)

    k = tilelang.compile(flags, target=target)
    a = rng.integers(0, 2, (16, 4)).astype(np.int32) * rng.integers(1, 5, (16, 4)).astype(np.int32)
    a[0] = 0
    a[1] = 3
    out = np.zeros((16, 2), np.int32)
    k(a, out)
    np.testing.assert_array_equal(out[:, 0], (a != 0).any(1))
    np.testing.assert_array_equal(out[:, 1], (a != 0).all(1))
    assert (T.int, T.uint, T.short, T.long, T.boolean) == ("int32", "uint32", "int16", "int64", "bool")


def test_annotate_min_blocks_per_sm(target, rng):
    def scale(ws):
        @T.prim_func
        def k(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
            with T.Kernel(2, threads=128) as bx:
                T.annotate_min_blocks_per_sm(4)
                for i in T.Parallel(128):
                    B[bx * 128 + i] = A[bx * 128 + i] * 2
        return k

    k = tilelang.compile(scale(False), target=target)  # a hint elsewhere: the same result
    a = rng.standard_normal(256).astype(np.float32)
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(b, a * 2)
    from tilelang import _C
    source = _C.codegen(_C.lower(scale(False).handle, "cuda -arch=sm_90a"), "cuda -arch=sm_90a")
    assert "__launch_bounds__(128, 4)" in source
    with pytest.raises(tilelang.errors.TileLangTypeError, match="n must be a positive int, got 0"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.annotate_min_blocks_per_sm(0)


def asserting(limit):
    @T.prim_func
    def checked(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                T.device_assert(A[i] < limit, "A out of range")
                B[i] = A[i] * 2

    return checked


def test_device_assert(target, rng, capfd):
    a = rng.uniform(0, 1, 64).astype(np.float32)
    b = np.zeros_like(a)
    k = tilelang.compile(asserting(2.0), target=target)
    if target == "cuda":
        import torch
        a_t, b_t = torch.from_numpy(a).cuda(), torch.zeros(64, device="cuda")
        k(a_t, b_t)  # holds: no trap
        np.testing.assert_array_equal(b_t.cpu().numpy(), a * 2)
        return
    k(a, b)
    np.testing.assert_array_equal(b, a * 2)
    if target == "cpu":
        capfd.readouterr()
        tilelang.compile(asserting(0.5), target=target)(a, b)  # fails for some elements: reported
        err = capfd.readouterr().err
        assert "test_small_names.py" in err and "device assert failed: A out of range" in err, err


def test_device_assert_reaches_cuda():
    from tilelang import _C
    from tilelang.jit.kernel import _include_dir
    from sass import nvrtc_reason
    source = _C.codegen(_C.lower(asserting(2.0).handle, "cuda -arch=sm_90a"), "cuda -arch=sm_90a")
    assert "tl::device_assert_fail(" in source and "device assert failed: A out of range" in source
    if not nvrtc_reason():
        assert _C.nvrtc_compile(source, "a.cu", "sm_90a", [_include_dir()])[:4] == b"\x7fELF"


def test_stepped_serial_and_unroll(target, rng):
    # T.serial(start, stop, step) and T.unroll(start, stop, step) as Python's range, a
    # negative step and a start that is a kernel value included.
    @T.prim_func
    def stepped(A: T.Tensor((64,), "float32"), S: T.Tensor((1,), "int32"), Out: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_var("float32")
            acc = 0
            for i in T.serial(3, 64, 5):
                acc += A[i]
            Out[0] = acc
            acc = 0
            for i in T.unroll(60, 1, -7):
                acc += A[i]
            Out[1] = acc
            acc = 0
            for i in T.serial(S[0], 64, 4):
                acc += A[i]
            Out[2] = acc
            acc = 0
            for i in T.serial(10, 10, 3):
                acc += 1
            Out[3] = acc

    k = tilelang.compile(stepped, target=target)
    a = rng.standard_normal(64).astype(np.float32)
    out = np.zeros(4, np.float32)
    k(a, np.array([6], np.int32), out)
    np.testing.assert_allclose(out[:3], [a[3:64:5].sum(), a[60:1:-7].sum(), a[6:64:4].sum()], rtol=1e-5, atol=1e-5)
    assert out[3] == 0
    with pytest.raises(tilelang.errors.TileLangTypeError,
                       match="the step must be a non-zero Python int, got 0"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                for i in T.serial(0, 8, 0):
                    A[i] = 0


def test_annotate_restrict_buffers(target, rng):
    """Overlapping parameters named by T.annotate_restrict_buffers lose __restrict__ (CUDA and
    CPU sources), the others keep it; an in-place shift through two views of one array then
    reads each element before it is overwritten."""
    from tilelang import _C

    def shift(annotated):
        @T.prim_func
        def k(X: T.Tensor((257,), "float32"), Y: T.Tensor((257,), "float32"), S: T.Tensor((1,), "float32")):
            if annotated:
                T.annotate_restrict_buffers(X, Y)
            with T.Kernel(1, threads=1) as bx:  # one thread walks the array in order
                for i in T.serial(256):
                    Y[i] = X[i + 1] + S[0]
        return k

    for arch_target in ("cuda -arch=sm_90a", "cpu"):
        source = _C.codegen(_C.lower(shift(True).handle, arch_target), arch_target)
        restricted = re.findall(r"float\* __restrict__ (\w+)", source)
        assert restricted and all(name.startswith("S") for name in restricted), (arch_target, restricted)
        assert len(re.findall(r"__restrict__", _C.codegen(_C.lower(shift(False).handle, arch_target),
                                                           arch_target))) >= 3
    k = tilelang.compile(shift(True), target=target)
    x = rng.standard_normal(257).astype(np.float32)
    want = x[1:] + 0.5
    if target.startswith("cuda"):
        import torch
        t = torch.from_numpy(x).cuda()
        k(t, t, torch.full((1,), 0.5, device="cuda"))
        got = t.cpu().numpy()
    else:
        got = x.copy()
        k(got, got, np.full(1, 0.5, np.float32))
    np.testing.assert_array_equal(got[:256], want)
    with pytest.raises(tilelang.errors.TileLangTypeError, match="takes the kernel's tensor parameters"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                f = T.alloc_fragment((8,), "float32")
                T.annotate_restrict_buffers(f)


def test_thread_return(target, rng):
    """Threads past the data end early; the others write theirs. The CPU refuses the call."""
    from tilelang import _C

    @T.prim_func
    def early(X: T.Tensor((100,), "float32"), Y: T.Tensor((100,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            t = T.get_thread_binding()
            if t >= 100:
                T.thread_return()
            Y[t] = X[t] * 3

    @T.prim_func
    def tile_level(X: T.Tensor((100,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.thread_return()

    if target == "cpu":
        with pytest.raises(tilelang.errors.TileLangUnsupportedError,
                           match="T.thread_return is not supported on target cpu"):
            _C.codegen(_C.lower(tile_level.handle, "cpu"), "cpu")
        assert "return;" in _C.codegen(_C.lower(early.handle, "cuda -arch=sm_90a"), "cuda -arch=sm_90a")
        return
    k = tilelang.compile(early, target=target)
    x = rng.standard_normal(100).astype(np.float32)
    if target.startswith("cuda"):
        import torch
        y = torch.zeros(100, device="cuda")
        k(torch.from_numpy(x).cuda(), y)
        y = y.cpu().numpy()
    else:
        y = np.zeros(100, np.float32)
        k(x, y)
    np.testing.assert_array_equal(y, x * 3)
