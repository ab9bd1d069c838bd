"""kernel.torch_op: compiled kernels as torch.library operators.

On the cpu target (CI): eager results against numpy, torch.library.opcheck (schema, fake
implementation, functionalisation), tracing with fake and symbolic-shaped tensors, and
torch.compile(fullgraph=True) over a model of two kernels with no graph break. On a
CUDA GPU (marked gpu): the same model under torch.compile's default back end, and CUDA
graph capture and replay against eager calls.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'tilelang[torch]')")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from kernels.elementwise import add_broadcast_tiled  # noqa: E402
from kernels.gemm import matmul  # noqa: E402


def _scale_rows(N, block_M=16, dtype="float32"):
    """Y[i, :] = X[i, :] * alpha, in place on X as well when the kernel is asked to (X is
    written): a kernel with a scalar, a dynamic dimension and a mutated input."""
    m = T.dynamic("m")

    @T.prim_func
    def scale_rows(X: T.Tensor((m, N), dtype), alpha: T.float32, Y: T.Tensor((m, N), dtype)):
        with T.Kernel(T.ceildiv(m, block_M), threads=32) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < m:
                    Y[bx * block_M + i, j] = X[bx * block_M + i, j] * alpha
                    X[bx * block_M + i, j] = X[bx * block_M + i, j] + 1.0

    return scale_rows


@pytest.fixture(scope="module")
def cpu_ops():
    """A linear layer as two kernels: y = x @ W (dynamic rows) then y + b."""
    m = T.dynamic("m")
    mm = tilelang.compile(matmul(m, 32, 48, block_M=16, block_N=32, block_K=16), out_idx=[2], target="cpu")
    add = tilelang.compile(add_broadcast_tiled(m, 32, block_M=16, block_N=32), out_idx=[2], target="cpu")
    return mm.torch_op("tilelang_test::matmul_cpu"), add.torch_op("tilelang_test::add_bias_cpu")


def _linear(ops):
    mm, add = ops

    def linear(x, w, b):
        return torch.relu(add(mm(x, w), b))

    return linear


def _inputs(rng, rows, device="cpu"):
    x = torch.from_numpy(rng.standard_normal((rows, 48), dtype=np.float32)).to(device)
    w = torch.from_numpy(rng.standard_normal((48, 32), dtype=np.float32)).to(device)
    b = torch.from_numpy(rng.standard_normal((32,), dtype=np.float32)).to(device)
    return x, w, b


def _reference(x, w, b):
    x, w, b = (t.cpu().numpy().astype(np.float64) for t in (x, w, b))
    return np.maximum(x @ w + b, 0)


class _CountingBackend:
    """A torch.compile back end that records the graphs it is given and runs them as traced."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def test_eager_matches_numpy(cpu_ops, rng):
    x, w, b = _inputs(rng, 40)  # 40 rows: not a multiple of the 16-row tile
    y = _linear(cpu_ops)(x, w, b)
    assert y.shape == (40, 32) and y.dtype == torch.float32
    np.testing.assert_allclose(y.numpy(), _reference(x, w, b), rtol=1e-4, atol=1e-4)


def test_schema_and_opcheck(cpu_ops, rng):
    mm, add = cpu_ops
    assert str(mm.default._schema) == "tilelang_test::matmul_cpu(Tensor A, Tensor B) -> Tensor"
    x, w, b = _inputs(rng, 24)
    # Schema, fake implementation against the real one, functionalisation, dynamic shapes.
    torch.library.opcheck(mm, (x, w))
    torch.library.opcheck(add, (mm(x, w), b))


def test_fake_tensors_give_declared_shapes_without_running(cpu_ops):
    from torch._subclasses.fake_tensor import FakeTensorMode
    mm, add = cpu_ops
    with FakeTensorMode():
        x = torch.empty(1000, 48)
        w = torch.empty(48, 32)
        y = add(mm(x, w), torch.empty(32))
    assert tuple(y.shape) == (1000, 32) and y.dtype == torch.float32 and y.device.type == "cpu"


def test_fake_implementation_checks_arguments(cpu_ops):
    from torch._subclasses.fake_tensor import FakeTensorMode
    mm, _ = cpu_ops
    with FakeTensorMode():
        with pytest.raises(TypeError, match=r"argument 'A' has dtype float16, expected float32"):
            mm(torch.empty(8, 48, dtype=torch.float16), torch.empty(48, 32))
        with pytest.raises(ValueError, match=r"argument 'B' has shape \(40, 32\), expected \(48, 32\)"):
            mm(torch.empty(8, 48), torch.empty(40, 32))
        with pytest.raises(ValueError, match=r"argument 'A' has strides .* expected a contiguous"):
            mm(torch.empty(48, 8).t(), torch.empty(48, 32))


def test_compile_fullgraph_two_kernels_no_graph_break(cpu_ops, rng):
    linear = _linear(cpu_ops)
    backend = _CountingBackend()
    compiled = torch.compile(linear, fullgraph=True, backend=backend, dynamic=True)
    for rows in (40, 7):  # symbolic rows: one graph serves both
        x, w, b = _inputs(rng, rows)
        np.testing.assert_allclose(compiled(x, w, b).numpy(), linear(x, w, b).numpy(), rtol=0, atol=0)
    assert len(backend.graphs) == 1
    targets = [str(n.target) for n in backend.graphs[0].graph.nodes if n.op == "call_function"]
    assert [t for t in targets if t.startswith("tilelang_test.")] == ["tilelang_test.matmul_cpu",
                                                                      "tilelang_test.add_bias_cpu"]
    explanation = torch._dynamo.explain(linear)(*_inputs(rng, 16))
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1


def test_compile_aot_eager_matches_numpy(cpu_ops, rng):
    compiled = torch.compile(_linear(cpu_ops), fullgraph=True, backend="aot_eager")
    x, w, b = _inputs(rng, 33)
    np.testing.assert_allclose(compiled(x, w, b).numpy(), _reference(x, w, b), rtol=1e-4, atol=1e-4)


def test_mutated_input_and_scalar(rng):
    k = tilelang.compile(_scale_rows(8), out_idx=[2], target="cpu")
    op = k.torch_op("tilelang_test::scale_rows")
    assert str(op.default._schema) == "tilelang_test::scale_rows(Tensor(a0!) X, float alpha) -> Tensor"
    x0 = torch.from_numpy(rng.standard_normal((21, 8), dtype=np.float32))

    def f(x):
        return op(x, 3.0) * 2

    x_eager = x0.clone()
    y_eager = f(x_eager)
    np.testing.assert_allclose(y_eager.numpy(), x0.numpy() * 6, rtol=1e-6)
    np.testing.assert_allclose(x_eager.numpy(), x0.numpy() + 1, rtol=1e-6)
    x_compiled = x0.clone()
    y_compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(x_compiled)
    assert torch.equal(y_compiled, y_eager) and torch.equal(x_compiled, x_eager)


def test_registration_names():
    @T.prim_func
    def negate(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = -A[i]

    k = tilelang.compile(negate, out_idx=[1], target="cpu")
    op = k.torch_op()  # the kernel's name in the "tilelang" namespace
    assert op is torch.ops.tilelang.negate and k.torch_op("tilelang::negate") is op
    assert torch.equal(op(torch.arange(16.0)), -torch.arange(16.0))
    other = tilelang.compile(negate, out_idx=[], target="cpu")
    with pytest.raises(ValueError, match=r"'tilelang::negate' is already registered for another kernel"):
        other.torch_op("negate")
    with pytest.raises(ValueError, match=r"operator name 'neg-ate' of 'x::neg-ate' is not a Python identifier"):
        k.torch_op("x::neg-ate")


def test_webgpu_kernel_is_refused():
    from conftest import target_unavailable_reason
    reason = target_unavailable_reason("webgpu")
    if reason:
        pytest.skip(f"target 'webgpu' not available: {reason}")

    @T.prim_func
    def twice(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0

    k = tilelang.compile(twice, out_idx=[1], target="webgpu")
    with pytest.raises(ValueError, match=r"compiled for target 'webgpu'; a torch operator runs kernels compiled "
                                         r"for 'cpu'"):
        k.torch_op("tilelang_test::twice")


# ---------------------------------------------------------------------------- GPU

def _gpu_reason():
    if not tilelang.cuda_available():
        return "no CUDA GPU detected (tilelang.cuda_available() returned False)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device (torch.cuda.is_available() returned False)"
    return None


needs_gpu = pytest.mark.skipif(_gpu_reason() is not None, reason=str(_gpu_reason()))


@pytest.fixture(scope="module")
def gpu_ops():
    """A half-precision linear layer on the tensor cores: y = x @ W then y + b."""
    m = T.dynamic("m")
    mm = tilelang.compile(matmul(m, 256, 512, block_M=64, block_N=64, block_K=32, in_dtype="float16",
                                 out_dtype="float16"), out_idx=[2], target="cuda")
    add = tilelang.compile(add_broadcast_tiled(m, 256, block_M=64, block_N=64, dtype="float16"), out_idx=[2],
                           target="cuda")
    return mm, add, mm.torch_op("tilelang_test::matmul_cuda"), add.torch_op("tilelang_test::add_bias_cuda")


def _gpu_inputs(rows, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, 512, device="cuda", dtype=torch.float16, generator=g)
    w = torch.randn(512, 256, device="cuda", dtype=torch.float16, generator=g) / 16
    b = torch.randn(256, device="cuda", dtype=torch.float16, generator=g)
    return x, w, b


def _time_ms(fn, reps=50):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


@pytest.mark.gpu
@needs_gpu
def test_gpu_compile_fullgraph_inductor(gpu_ops):
    _, _, mm, add = gpu_ops
    linear = _linear((mm, add))
    x, w, b = _gpu_inputs(1000)  # 1000 rows: not a multiple of the 64-row tile
    eager = linear(x, w, b)
    reference = torch.relu(x.float() @ w.float() + b.float())
    torch.testing.assert_close(eager.float(), reference, rtol=2e-2, atol=2e-2)
    explanation = torch._dynamo.explain(linear)(x, w, b)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    compiled = torch.compile(linear, fullgraph=True)
    assert torch.equal(compiled(x, w, b), eager)
    print(f"\neager {_time_ms(lambda: linear(x, w, b)):.4f} ms, torch.compile "
          f"{_time_ms(lambda: compiled(x, w, b)):.4f} ms per call")


@pytest.mark.gpu
@needs_gpu
def test_gpu_cuda_graph_replay_equals_eager(gpu_ops):
    mm_kernel, add_kernel, mm, add = gpu_ops
    linear = _linear((mm, add))
    x, w, b = _gpu_inputs(512, seed=1)
    eager = linear(x, w, b).clone()
    # The kernels themselves, outputs given: the launch allocates nothing.
    y_mm = torch.empty(512, 256, device="cuda", dtype=torch.float16)
    y = torch.empty_like(y_mm)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up off the default stream, as capture needs
        linear(x, w, b)
        mm_kernel(x, w, y_mm)
        add_kernel(y_mm, b, y)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = linear(x, w, b)
    raw_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(raw_graph):
        mm_kernel(x, w, y_mm)
        add_kernel(y_mm, b, y)
    for seed in (2, 3):  # new inputs copied into the captured ones, then replayed
        for dst, src in zip((x, w, b), _gpu_inputs(512, seed=seed)):
            dst.copy_(src)
        graph.replay()
        raw_graph.replay()
        torch.cuda.synchronize()
        expected = linear(x, w, b)
        assert torch.equal(captured, expected)
        assert torch.equal(torch.relu(y), expected)
    for dst, src in zip((x, w, b), _gpu_inputs(512, seed=1)):
        dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)
    print(f"\neager {_time_ms(lambda: linear(x, w, b)):.4f} ms, CUDA graph replay "
          f"{_time_ms(graph.replay):.4f} ms per call")
