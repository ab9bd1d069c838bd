"""Layout pictures: T.Layout / T.Fragment, tilelang.tools.kernel_layouts (the compiler's
own tables), plot_layout, and kernel.get_lowering_report(pictures=dir).

The mma.sync accumulator and the swizzled shared operands are checked against the PTX
ISA's formulas and the swizzle's definition, written out here independently; the
pictures are checked by reading back the labels drawn in every cell."""
import re

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'tilelang[plot]')")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang import _C  # noqa: E402
from kernels.gemm import matmul  # noqa: E402
from tilelang.tools import kernel_layouts, plot_layout  # noqa: E402
from tilelang.tools.plot_layout import figure_of  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _gemm_16x16():
    """One warp computing a 16 x 16 fp16 tile: its accumulator is two m16n8 atoms."""
    return matmul(32, 32, 32, block_M=16, block_N=16, block_K=16, in_dtype="float16", accum_dtype="float32",
                  out_dtype="float16", threads=32)


def _mma_accumulator_reference(rows, cols):
    """thread and slot of C[r, c] for m16n8 accumulators tiled over one warp's tile, from
    the PTX ISA (c0..c3 of lane l: row l // 4 + 8 * (i // 2), column (l % 4) * 2 + i % 2),
    the atoms along N in consecutive groups of four slots."""
    thread = np.empty((rows, cols), dtype=np.int64)
    slot = np.empty((rows, cols), dtype=np.int64)
    for r in range(rows):
        for c in range(cols):
            atom_n, cc = divmod(c, 8)
            thread[r, c] = (r % 8) * 4 + cc // 2
            slot[r, c] = atom_n * 4 + (r % 16 // 8) * 2 + cc % 2
    return thread, slot


def _cell_texts(fig):
    """{(row, col): text} of the labels drawn at cell centres."""
    ax = fig.axes[0]
    out = {}
    for t in ax.texts:
        x, y = t.get_position()
        if x % 1 == 0.5 and y % 1 == 0.5:
            out[(int(y), int(x))] = t.get_text()
    return out


def test_mma_accumulator_matches_ptx_and_picture(tmp_path):
    layouts = kernel_layouts(_gemm_16x16(), "cuda -arch=sm_80")
    acc = layouts["C_local"]
    assert isinstance(acc, T.Fragment) and acc.get_input_shape() == [16, 16]
    assert acc.get_thread_size() == 32 and acc.replicate_size == 1 and acc.local_size() == 8
    assert acc.partition.startswith("mma(")
    thread, slot = _mma_accumulator_reference(16, 16)
    np.testing.assert_array_equal(acc.threads_of()[0], thread)
    np.testing.assert_array_equal(acc.slots_of(), slot)
    assert acc.map_forward_thread([9, 13]) == [thread[9, 13]] and acc.map_forward_index([9, 13]) == [slot[9, 13]]

    (path,) = plot_layout(acc, save_directory=tmp_path, name="mma_accumulator", formats="png")
    data = open(path, "rb").read()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    texts = _cell_texts(figure_of(acc))
    assert len(texts) == 256
    for (r, c), text in texts.items():
        assert text == f"T{thread[r, c]}\nL{slot[r, c]}", (r, c)


def _swizzled_offset(r, c, cols, bits, width):
    """The XOR swizzle of 16-byte chunks inside width-byte segments (layout.md)."""
    vec = 128 // bits
    chunks = width // 16
    key = (r % 8) // (8 // chunks)
    segment, chunk = divmod(c // vec, chunks)
    return r * cols + (segment * chunks + (chunk ^ key)) * vec + c % vec


def test_swizzled_shared_operands_and_bank_picture(tmp_path):
    layouts = kernel_layouts(_gemm_16x16(), "cuda -arch=sm_80")
    a = layouts["A_shared"]
    assert isinstance(a, T.Layout) and a.swizzle == "32B" and a.element_bits == 16
    expected = np.array([[_swizzled_offset(r, c, 16, 16, 32) for c in range(16)] for r in range(16)])
    np.testing.assert_array_equal(a.offsets(), expected)
    assert not np.array_equal(expected, np.arange(256).reshape(16, 16))  # it does move elements
    texts = _cell_texts(figure_of(a))
    for (r, c), text in texts.items():
        assert text == f"b{expected[r, c] * 2 // 4 % 32}\n{expected[r, c]}", (r, c)
    paths = plot_layout(a, save_directory=tmp_path / "new", name="a", formats="png,svg")
    assert [p[-3:] for p in paths] == ["png", "svg"] and open(paths[0], "rb").read().startswith(PNG_MAGIC)


def test_user_fragment_with_copies_and_layout():
    # Each element of an 8 x 4 tile held by two threads: thread = 4 * row % 16 + col + 16 * rep.
    frag = T.Fragment([8, 4], forward_thread_fn=lambda i, j, rep: (4 * i) % 16 + j + 16 * rep, replicate=2,
                      forward_index_fn=lambda i, j: i // 4)
    assert frag.get_thread_size() == 32 and frag.replicate_size == 2 and frag.local_size() == 2
    assert frag.map_forward_thread([1, 5, 3]) == [16 + 4 * 5 % 16 + 3] and frag.map_forward_index([1, 5, 3]) == [1]
    texts = _cell_texts(figure_of(frag))
    assert texts[(5, 3)] == "T7/23\nL1"
    lay = T.Layout([4, 8], lambda i, j: [j, i])
    assert lay.get_output_shape() == [8, 4] and lay.map_forward_index([3, 6]) == [6, 3]
    assert _cell_texts(figure_of(lay))[(3, 6)] == str(6 * 4 + 3)


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"Expected T.Layout or T.Fragment, but got list"):
        plot_layout([1, 2])
    lay = T.Layout([2, 2], lambda i, j: i * 2 + j)
    with pytest.raises(ValueError, match=r"unknown picture format\(s\) \['jpeg'\]"):
        plot_layout(lay, formats="png,jpeg")
    with pytest.raises(ValueError, match=r"copies of element \[0, 0\] are at different slots"):
        T.Fragment([2, 2], forward_fn=lambda i, j, rep: (rep, rep), replicate=2)
    with pytest.raises(TypeError, match=r"forward_fn\(0, 0\) must be an integer, got 0.0"):
        T.Layout([2, 2], lambda i, j: i * 0.0)
    with pytest.raises(IndexError, match=r"index \[2, 0\] is outside the layout's shape \[2, 2\]"):
        lay.map_forward_index([2, 0])


def test_lowering_report_pictures_cpu_has_none(tmp_path):
    kernel = tilelang.compile(_gemm_16x16(), out_idx=[2], target="cpu")
    report = kernel.get_lowering_report(pictures=tmp_path)
    assert report.startswith(kernel.get_lowering_report())
    assert "pictures: none (the cpu target runs each block as one thread: no thread layouts)" in report
    assert list(tmp_path.iterdir()) == []


def _report_pictures(report):
    return re.findall(r"^picture of (\w+) \(line (\d+); (.*)\): (.*\.png)$", report, re.M)


def test_lowering_report_pictures_webgpu(tmp_path):
    from conftest import target_unavailable_reason
    reason = target_unavailable_reason("webgpu")
    if reason:
        pytest.skip(f"target 'webgpu' not available: {reason}")
    kernel = tilelang.compile(_gemm_16x16(), out_idx=[2], target="webgpu")
    pictures = _report_pictures(kernel.get_lowering_report(pictures=tmp_path))
    assert [p[0] for p in pictures] == ["C_local"] and pictures[0][2].startswith("grid(")
    assert open(pictures[0][3], "rb").read().startswith(PNG_MAGIC)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["main_C_local.png"]


@pytest.mark.gpu
@pytest.mark.skipif(not tilelang.cuda_available(), reason="no CUDA GPU detected (tilelang.cuda_available() "
                                                           "returned False)")
def test_lowering_report_pictures_cuda(tmp_path):
    kernel = tilelang.compile(_gemm_16x16(), out_idx=[2], target="cuda")
    pictures = _report_pictures(kernel.get_lowering_report(pictures=tmp_path))
    # On sm_90 the accumulator's store goes through a swizzled staging tile (a TMA store).
    staged = ["C_local_staged"] if _C.cuda_device_arch(0).startswith("sm_90") else []
    assert sorted(p[0] for p in pictures) == sorted(["A_shared", "B_shared", "C_local"] + staged)
    assert {p[0]: p[2] for p in pictures}["C_local"].startswith("mma(")
    for _, _, _, path in pictures:
        assert open(path, "rb").read().startswith(PNG_MAGIC)
