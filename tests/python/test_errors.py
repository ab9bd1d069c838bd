"""Bad programs and bad calls: the exception type and what the message says.

Compile errors (a bad kernel): the exception is the tilelang.errors class for
the kind of mistake, and its message starts with "<file>:<line>:" of the
offending statement in the user's source, here this file. The expected line
is found through the marker comment ``<<err:NAME>>`` on that statement.

Call errors (a good kernel called with bad arguments): checked before launch,
a TypeError or ValueError that names the parameter and both the expected and
the given value; nothing is launched.
"""

import os
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import (
    TileLangBoundsError,
    TileLangError,
    TileLangLayoutError,
    TileLangNameError,
    TileLangShapeError,
    TileLangSyntaxError,
    TileLangTypeError,
    TileLangUnsupportedError,
)

# dtype names used in kernel signatures
F32 = "float32"
F16 = "float16"

THIS_FILE = os.path.basename(__file__)
with open(os.path.abspath(__file__), encoding="utf-8") as _f:
    _SOURCE_LINES = _f.read().splitlines()


def marker_line(name):
    """1-based line of the statement carrying the marker <<err:NAME>>."""
    token = "<<err:" + name + ">>"
    hits = [n for n, text in enumerate(_SOURCE_LINES, start=1) if token in text]
    assert len(hits) == 1, f"marker {token} must appear exactly once, found {len(hits)}"
    return hits[0]


def message_of(err):
    # SyntaxError subclasses may decorate str(); the message proper is args[0].
    if err.args and isinstance(err.args[0], str):
        return err.args[0]
    return str(err)


def check_compile_error(excinfo, marker, *expected):
    """The message starts with this file's name and the marker's line, and
    contains every expected piece: a plain string (case-insensitive) or a
    compiled regular expression."""
    msg = message_of(excinfo.value)
    m = re.match(r"(.+?):(\d+):", msg)
    assert m, f"message does not start with '<file>:<line>:': {msg!r}"
    assert os.path.basename(m.group(1)) == THIS_FILE, f"wrong file in {msg!r}"
    assert int(m.group(2)) == marker_line(marker), f"wrong line in {msg!r}"
    for piece in expected:
        if isinstance(piece, re.Pattern):
            assert piece.search(msg), f"{piece.pattern!r} not found in {msg!r}"
        else:
            assert piece.lower() in msg.lower(), f"{piece!r} not found in {msg!r}"


def shape_pattern(*dims):
    """Matches a shape written as "32, 16", "32,16" or "32x16"."""
    return re.compile(r"\b" + r"\s*[,x]\s*".join(str(d) for d in dims) + r"\b")


def word(w):
    return re.compile(r"\b" + re.escape(w) + r"\b")


def test_error_class_hierarchy():
    for cls in (TileLangSyntaxError, TileLangNameError, TileLangTypeError, TileLangShapeError,
                TileLangBoundsError, TileLangUnsupportedError, TileLangLayoutError):
        assert issubclass(cls, TileLangError), cls
    assert issubclass(TileLangError, Exception)
    assert issubclass(TileLangNameError, NameError)
    assert issubclass(TileLangTypeError, TypeError)
    assert issubclass(TileLangShapeError, ValueError)
    assert issubclass(TileLangBoundsError, IndexError)


# ---------------------------------------------------------------------------
# Bad programs
# ---------------------------------------------------------------------------

def test_unknown_name(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16,), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                for i in T.Parallel(16):
                    B[i] = A[i] * scale_not_defined_anywhere  # noqa: F821  <<err:unknown_name>>

        return main

    with pytest.raises(TileLangNameError) as ei:
        tilelang.compile(build(), target=target)
    assert isinstance(ei.value, NameError)
    check_compile_error(ei, "unknown_name", "scale_not_defined_anywhere")


def test_unknown_language_function(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16, 16), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                x = T.alloc_fragment((16, 16), "float32")
                r = T.alloc_fragment((16,), "float32")
                T.copy(A, x)
                T.reduce_median(x, r, dim=1)  # <<err:unknown_op>>
                T.copy(r, B)

        return main

    with pytest.raises(TileLangNameError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "unknown_op", "reduce_median")


def test_copy_shape_mismatch(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((32, 8), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                S = T.alloc_shared((32, 16), "float32")
                F = T.alloc_fragment((32, 8), "float32")
                T.copy(A, S)
                T.copy(S, F)  # <<err:copy_shape>>
                T.copy(F, B)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    assert isinstance(ei.value, ValueError)
    check_compile_error(ei, "copy_shape", "copy", shape_pattern(32, 16), shape_pattern(32, 8))


def test_gemm_k_mismatch(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((24, 32), F32),
                 C: T.Tensor((32, 32), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                A_s = T.alloc_shared((32, 16), "float32")
                B_s = T.alloc_shared((24, 32), "float32")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.clear(C_l)
                T.gemm(A_s, B_s, C_l)  # <<err:gemm_k>>
                T.copy(C_l, C)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "gemm_k", "gemm", word("K"), word("16"), word("24"))


def test_gemm_output_shape_mismatch(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((16, 32), F32),
                 C: T.Tensor((32, 16), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                A_s = T.alloc_shared((32, 16), "float32")
                B_s = T.alloc_shared((16, 32), "float32")
                C_l = T.alloc_fragment((32, 16), "float32")
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.clear(C_l)
                T.gemm(A_s, B_s, C_l)  # <<err:gemm_n>>
                T.copy(C_l, C)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "gemm_n", "gemm", word("N"))


def test_gemm_rank_error(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((2, 16, 16), F32), B: T.Tensor((16, 16), F32),
                 C: T.Tensor((16, 16), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                A_s = T.alloc_shared((2, 16, 16), "float32")
                B_s = T.alloc_shared((16, 16), "float32")
                C_l = T.alloc_fragment((16, 16), "float32")
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.clear(C_l)
                T.gemm(A_s, B_s, C_l)  # <<err:gemm_rank>>
                T.copy(C_l, C)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "gemm_rank", "gemm", re.compile(r"rank|2-?d|dimension|dims", re.I))


def test_gemm_dtype_mismatch(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F16), B: T.Tensor((16, 32), F32),
                 C: T.Tensor((32, 32), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                A_s = T.alloc_shared((32, 16), "float16")
                B_s = T.alloc_shared((16, 32), "float32")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.clear(C_l)
                T.gemm(A_s, B_s, C_l)  # <<err:gemm_dtype>>
                T.copy(C_l, C)

        return main

    with pytest.raises(TileLangTypeError) as ei:
        tilelang.compile(build(), target=target)
    assert isinstance(ei.value, TypeError)
    check_compile_error(ei, "gemm_dtype", "gemm", "float16", "float32")


def test_constant_region_out_of_bounds(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((32, 16), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                S_tile = T.alloc_shared((32, 16), "float32")
                F = T.alloc_fragment((32, 16), "float32")
                T.copy(A, S_tile)
                T.copy(S_tile[16:48, 0:16], F)  # <<err:oob_region>>
                T.copy(F, B)

        return main

    with pytest.raises(TileLangBoundsError) as ei:
        tilelang.compile(build(), target=target)
    assert isinstance(ei.value, IndexError)
    check_compile_error(ei, "oob_region", "S_tile", word("48"))


def test_local_array_out_of_bounds(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((128,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                r = T.alloc_local((4,), "float32")
                for i in T.unroll(8):
                    r[i] = 1.0  # <<err:oob_local>>
                A[0] = r[0]

        return main

    with pytest.raises(TileLangBoundsError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "oob_local", "'r' has 4 elements", word("7"))


def test_use_swizzle_bad_order(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((128,), F32)):
            with T.Kernel(1, 1, threads=128) as (bx, by):  # noqa: F841
                T.use_swizzle(8, order="diagonal")  # <<err:swizzle_order>>
                A[0] = 1.0

        return main

    with pytest.raises(TileLangTypeError) as ei:
        build()
    check_compile_error(ei, "swizzle_order", "order must be 'row' or 'col'", "diagonal")


def test_annotate_layout_of_a_fragment(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((64, 64), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                F = T.alloc_fragment((64, 64), "float32")
                T.annotate_layout({F: tilelang.layout.make_swizzled_layout(F)})  # <<err:annotate_frag>>
                T.copy(A, F)
                T.copy(F, A)

        return main

    with pytest.raises(TileLangLayoutError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "annotate_frag", "'F' is in scope 'local.fragment'", "shared buffers")


def test_reduce_bad_dim(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((32,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                x = T.alloc_fragment((32, 16), "float32")
                r = T.alloc_fragment((32,), "float32")
                T.copy(A, x)
                T.reduce_sum(x, r, dim=2)  # <<err:reduce_dim>>
                T.copy(r, B)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "reduce_dim", "dim", word("2"))


def test_reduce_bad_destination_shape(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                x = T.alloc_fragment((32, 16), "float32")
                r = T.alloc_fragment((16,), "float32")
                T.copy(A, x)
                T.reduce_max(x, r, dim=1)  # <<err:reduce_dst>>
                T.copy(r, B)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "reduce_dst", "reduce", word("32"), word("16"))


def test_cumsum_bad_dim(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((32, 16), F32), B: T.Tensor((32, 16), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                s = T.alloc_shared((32, 16), "float32")
                T.copy(A, s)
                T.cumsum(s, dim=2)  # <<err:cumsum_dim>>
                T.copy(s, B)

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "cumsum_dim", "dim", word("2"))


def test_atomic_add_tile_shape_mismatch(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16, 16), F32), C: T.Tensor((32, 16), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                F = T.alloc_fragment((16, 16), "float32")
                T.copy(A, F)
                T.atomic_add(C[0:32, 0:16], F)  # <<err:atomic_shape>>

        return main

    with pytest.raises(TileLangShapeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "atomic_shape", "atomic", shape_pattern(32, 16), shape_pattern(16, 16))


def test_try_statement_is_not_in_the_language(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16,), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                try:  # <<err:try>>
                    for i in T.Parallel(16):
                        B[i] = A[i]
                except Exception:
                    pass

        return main

    with pytest.raises(TileLangSyntaxError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "try", "try")


def test_del_statement_is_not_in_the_language(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16,), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                tmp = T.alloc_fragment((16,), "float32")
                T.copy(A, tmp)
                T.copy(tmp, B)
                del tmp  # <<err:del>>

        return main

    with pytest.raises(TileLangSyntaxError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "del", "del")


def test_thread_binding_unsupported_on_cpu(target):
    if target != "cpu":
        pytest.skip("T.get_thread_binding is valid on GPU targets; the error is specific to cpu")

    def build():
        @T.prim_func
        def main(A: T.Tensor((128,), F32), B: T.Tensor((128,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                tx = T.get_thread_binding()  # <<err:thread_binding>>
                B[tx] = A[tx]

        return main

    with pytest.raises(TileLangUnsupportedError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "thread_binding", "get_thread_binding", "cpu")


def test_unknown_dtype(target):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16,), F32), B: T.Tensor((16,), F32)):
            with T.Kernel(1, threads=128) as bx:  # noqa: F841
                tmp = T.alloc_fragment((16,), "float31")  # <<err:unknown_dtype>>
                T.copy(A, tmp)
                T.copy(tmp, B)

        return main

    with pytest.raises(TileLangTypeError) as ei:
        tilelang.compile(build(), target=target)
    check_compile_error(ei, "unknown_dtype", "float31")


def test_unknown_target():
    @T.prim_func
    def main(A: T.Tensor((16,), F32), B: T.Tensor((16,), F32)):
        with T.Kernel(1, threads=128) as bx:  # noqa: F841
            for i in T.Parallel(16):
                B[i] = A[i]

    # A bad argument of the compile call, not a bad statement in the kernel:
    # the message names the target given; no source line is required.
    with pytest.raises((TileLangError, ValueError)) as ei:
        tilelang.compile(main, target="cudaa")
    assert "cudaa" in message_of(ei.value)


# ---------------------------------------------------------------------------
# Bad calls
# ---------------------------------------------------------------------------

_ADD_KERNELS = {}


def add_kernel(target):
    """dst_c = src_a + src_b on (64, 32) float32 tensors, compiled once per target."""
    if target not in _ADD_KERNELS:

        @T.prim_func
        def main(
            src_a: T.Tensor((64, 32), F32),
            src_b: T.Tensor((64, 32), F32),
            dst_c: T.Tensor((64, 32), F32),
        ):
            with T.Kernel(2, threads=128) as bx:
                for i, j in T.Parallel(32, 32):
                    dst_c[bx * 32 + i, j] = src_a[bx * 32 + i, j] + src_b[bx * 32 + i, j]

        _ADD_KERNELS[target] = tilelang.compile(main, target=target)
    return _ADD_KERNELS[target]


def _operands(rng):
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    c = np.full((64, 32), 7.0, dtype=np.float32)
    return a, b, c


def test_good_call_works(target, rng):
    # The kernel the bad calls below misuse does work when called right.
    a, b, c = _operands(rng)
    add_kernel(target)(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_call_wrong_argument_count(target, rng):
    a, b, _ = _operands(rng)
    with pytest.raises(TypeError) as ei:
        add_kernel(target)(a, b)
    msg = str(ei.value)
    assert word("3").search(msg) and word("2").search(msg), msg


def test_call_wrong_shape(target, rng):
    a, _, c = _operands(rng)
    b_bad = rng.standard_normal((64, 31)).astype(np.float32)
    with pytest.raises(ValueError) as ei:
        add_kernel(target)(a, b_bad, c)
    msg = str(ei.value)
    assert "src_b" in msg, msg
    assert shape_pattern(64, 32).search(msg) and shape_pattern(64, 31).search(msg), msg
    # Nothing was launched: the output still holds what it held.
    assert np.all(c == 7.0)


def test_call_inconsistent_dynamic_dim(target, rng):
    rows = T.dynamic("rows")

    @T.prim_func
    def main(
        lhs: T.Tensor((rows, 16), F32),
        rhs: T.Tensor((rows, 16), F32),
        out: T.Tensor((rows, 16), F32),
    ):
        with T.Kernel(T.ceildiv(rows, 32), threads=128) as bx:
            for i, j in T.Parallel(32, 16):
                if bx * 32 + i < rows:
                    out[bx * 32 + i, j] = lhs[bx * 32 + i, j] + rhs[bx * 32 + i, j]

    kernel = tilelang.compile(main, target=target)
    lhs = rng.standard_normal((10, 16)).astype(np.float32)
    rhs = rng.standard_normal((12, 16)).astype(np.float32)
    out = np.zeros((10, 16), dtype=np.float32)
    with pytest.raises(ValueError) as ei:
        kernel(lhs, rhs, out)
    msg = str(ei.value)
    assert "rows" in msg, msg
    assert word("10").search(msg) and word("12").search(msg), msg


def test_call_wrong_dtype(target, rng):
    a, b, c = _operands(rng)
    with pytest.raises(TypeError) as ei:
        add_kernel(target)(a.astype(np.float64), b, c)
    msg = str(ei.value)
    assert "src_a" in msg and "float32" in msg and "float64" in msg, msg


def test_call_non_contiguous(target, rng):
    _, b, c = _operands(rng)
    a_view = rng.standard_normal((32, 64)).astype(np.float32).T  # shape (64, 32), strides transposed
    assert a_view.shape == (64, 32) and not a_view.flags["C_CONTIGUOUS"]
    with pytest.raises(ValueError) as ei:
        add_kernel(target)(a_view, b, c)
    msg = str(ei.value)
    assert "src_a" in msg, msg
    assert re.search(r"contiguous|stride", msg, re.I), msg


def test_call_python_list(target, rng):
    a, b, c = _operands(rng)
    with pytest.raises(TypeError) as ei:
        add_kernel(target)(a.tolist(), b, c)
    msg = str(ei.value)
    assert "src_a" in msg and "list" in msg, msg
