"""GEMM sweep in the plain TileLang dialect, run unchanged by whichever `tilelang` package is
importable: this project's, or upstream TileLang's (PYTHONPATH pointing at its wheel) in a
separate process, so both compile the same DSL source with the same configuration list.
Prints one JSON line per measurement; benchmarks/hopper_table.py joins the runs.

    python3 benchmarks/gemm_sweep.py --label ours [--quick] [--refs]

--refs also measures torch.matmul (cuBLAS) and torch._scaled_mm on the same inputs.
"""
import argparse
import json
import os
import sys
import time

import torch
import triton

from sweep_common import context_lost

import tilelang
import tilelang.language as T

# (block_M, block_N, block_K, num_stages, threads[, schedule[, policy]]): the same list for
# every implementation; each figure is the best of the list. Schedule "persistent" launches
# one block per SM, each taking tiles in turn (T.Persistent), instead of one block per tile;
# policy is T.gemm's warp policy (Square by default; FullRow puts the warpgroups along M).
# Schedule "cluster" launches clusters of two blocks along N (T.Kernel(cluster_dims=)), the
# same kernel otherwise: a compiler may multicast the A tile the two blocks share.
CONFIGS_16BIT = [
    (128, 256, 64, 3, 256),
    (128, 256, 64, 4, 256),
    (256, 128, 64, 3, 256),
    (128, 256, 64, 4, 256, "grid", "FullRow"),
    (128, 256, 64, 3, 256, "persistent"),
    (128, 256, 64, 4, 256, "cluster"),
    (128, 256, 64, 4, 256, "cluster", "FullRow"),
]
CONFIGS_8BIT = [
    (128, 256, 128, 3, 256),
    (128, 256, 128, 4, 256),
    (256, 128, 128, 3, 256),
    (128, 256, 128, 4, 256, "grid", "FullRow"),
    (128, 256, 128, 3, 256, "persistent"),
    (128, 256, 128, 4, 256, "cluster"),
]
SQUARES = [2048, 4096, 8192, 16384]
LLM_NK = [(4096, 4096), (7168, 7168), (14336, 4096), (4096, 14336), (28672, 4096)]


# Every name an annotation uses also appears in the body: upstream's parser resolves names
# from the function's closure, which holds only those.
def matmul(M, N, K, block_M, block_N, block_K, num_stages, threads, schedule="grid", policy="Square", *, dtype,
           accum_dtype="float32"):
    """C = A @ B, B stored K x N, C in the input dtype."""
    policy = getattr(T.GemmWarpPolicy, policy)
    if schedule == "persistent":
        return matmul_persistent(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype, accum_dtype,
                                 policy)
    # "grid-smem": the result goes out through a shared tile, as upstream's examples write it.
    through_shared = schedule == "grid-smem"
    cluster_dims = (2, 1, 1) if schedule == "cluster" else None

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads, cluster_dims=cluster_dims) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(8)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, policy=policy)
            if through_shared:
                C_shared = T.alloc_shared((block_M, block_N), dtype)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * block_M, bx * block_N])
            else:
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul_persistent(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype, accum_dtype, policy):
    """matmul with one block per SM, each taking output tiles in turn."""
    sm_num = torch.cuda.get_device_properties(0).multi_processor_count

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(sm_num, threads=threads) as (block_id):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            for by, bx in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local, policy=policy)
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul_nt_fp8_persistent(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype, accum_dtype, policy):
    """matmul_nt_fp8 with one block per SM, each taking output tiles in turn."""
    sm_num = torch.cuda.get_device_properties(0).multi_processor_count

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(sm_num, threads=threads) as (block_id):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            for by, bx in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                    T.gemm(A_shared, B_shared, C_local, transpose_B=True, policy=policy)
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul_nt_fp8(M, N, K, block_M, block_N, block_K, num_stages, threads, schedule="grid", policy="Square", *,
                  dtype, accum_dtype="float32"):
    """C = A @ B^T in bfloat16, B stored N x K (the layout 8-bit tensor-core operands need)."""
    policy = getattr(T.GemmWarpPolicy, policy)
    if schedule == "persistent":
        return matmul_nt_fp8_persistent(M, N, K, block_M, block_N, block_K, num_stages, threads, dtype, accum_dtype,
                                        policy)
    cluster_dims = (2, 1, 1) if schedule == "cluster" else None

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads, cluster_dims=cluster_dims) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(8)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True, policy=policy)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def emit(**kw):
    print(json.dumps(kw), flush=True)



def sweep(label, dtype, shapes, configs, refs, b_transposed=False):
    """Each configuration is compiled fresh (a new kernel source) and timed; compile_s is
    the whole tilelang.compile call: parse, lowering, code generation and the compiler."""
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float8_e4m3": torch.float8_e4m3fn}[dtype]
    for (m, n, k) in shapes:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda").to(tdt)
        b = torch.randn(n, k, device="cuda").to(tdt) if b_transposed else torch.randn(k, n, device="cuda").to(tdt)
        ref_c = a.float() @ (b.float().t() if b_transposed else b.float())
        flops = 2 * m * n * k
        shape = f"{m}x{n}x{k}"
        for cfg in configs:
            try:
                t0 = time.perf_counter()
                build = matmul_nt_fp8 if b_transposed else matmul
                kern = tilelang.compile(build(m, n, k, *cfg, dtype=dtype), out_idx=[2], target="cuda")
                compile_s = time.perf_counter() - t0
                c = kern(a, b)
                err = rel_err(c.float(), ref_c)
                ms = bench(lambda: kern(a, b))
            except Exception as e:  # a configuration that fails is reported, not fatal
                emit(label=label, dtype=dtype, shape=shape, cfg=list(cfg), error=str(e).splitlines()[0][:160])
                if context_lost():
                    print(f"the CUDA context is lost after {dtype} {shape} {cfg}: stopping the sweep", file=sys.stderr)
                    sys.exit(2)
                continue
            emit(label=label, dtype=dtype, shape=shape, cfg=list(cfg), tflops=flops / ms / 1e9, err=err,
                 compile_s=compile_s)
            dump = os.environ.get("GEMM_SWEEP_DUMP")
            name = f"{dump}.{label}.{dtype}.{'_'.join(map(str, cfg))}.cu"
            if dump and not os.path.exists(name):  # each configuration's source once, to read
                with open(name, "w") as f:
                    f.write(kern.get_kernel_source())
        if refs:
            if dtype == "float8_e4m3":
                one = torch.ones((), device="cuda")
                fn = lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16)  # noqa: E731
                name = "torch._scaled_mm"
            else:
                fn = lambda: torch.matmul(a, b)  # noqa: E731
                name = "cuBLAS"
            emit(label=name, dtype=dtype, shape=shape, cfg=None, tflops=flops / bench(fn) / 1e9, err=0.0)
        del a, b, ref_c
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--refs", action="store_true")
    ap.add_argument("--dtypes", default="bfloat16,float16,float8_e4m3")
    ap.add_argument("--kscan", action="store_true",
                    help="bf16 8192 x 14336 x K for K from 256 to 4096: the per-tile cost (epilogue, fill) "
                         "against the K loop's, for the direct and the shared-memory epilogue")
    args = ap.parse_args()
    # Every compile is a cold one: no disk cache for either implementation.
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    if hasattr(tilelang, "disable_cache"):
        tilelang.disable_cache()
    if args.kscan:
        cfgs = [(128, 256, 64, 4, 256), (128, 256, 64, 3, 256, "grid-smem"), (128, 256, 64, 4, 256, "grid-smem"),
                (128, 256, 64, 4, 256, "persistent")]
        sweep(args.label, "bfloat16", [(8192, 14336, k) for k in (256, 1024, 2048, 4096)], cfgs, args.refs)
        return
    squares = [4096, 8192] if args.quick else SQUARES
    llm = [(4096, 4096, 4096), (8192, 14336, 4096)] if args.quick else [
        (m, n, k) for m in (4096, 8192) for (n, k) in LLM_NK]
    dtypes = args.dtypes.split(",")
    for dtype in ("bfloat16", "float16"):
        if dtype in dtypes and not (args.quick and dtype == "float16"):
            sweep(args.label, dtype, [(s, s, s) for s in squares] + llm, CONFIGS_16BIT, args.refs)
    if "float8_e4m3" in dtypes:
        sweep(args.label, "float8_e4m3", [(s, s, s) for s in ([8192] if args.quick else [4096, 8192])],
              CONFIGS_8BIT, args.refs, b_transposed=True)


if __name__ == "__main__":
    main()
