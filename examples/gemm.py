"""Tiled matrix multiplication in TileLang: C = A @ B.

Each block of the grid computes one block_M x block_N tile of C. It walks the
K dimension in steps of block_K: a tile of A and a tile of B are copied into
shared memory, multiplied with T.gemm and accumulated in a register fragment.
T.Pipelined lets the copies of the next steps overlap the multiply of the
current one (num_stages buffers in flight). The finished tile is written back
with T.copy, which also handles tiles that run past the edge of C.

The kernel is compiled for target "auto": a GPU when one is present, the CPU
otherwise. The result is checked against numpy and both are timed.

    python examples/gemm.py                       # 1024 x 1024 x 1024, float32
    python examples/gemm.py --dtype float16       # 16-bit inputs and output, float32 accumulation
    python examples/gemm.py --m 512 --n 768 --k 256 --show-source
"""

import argparse
import statistics
import sys
import time

import numpy as np

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1], target="auto")
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128,
           dtype="float32", accum_dtype="float32", swizzle_panel=0):

    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            if swizzle_panel:
                T.use_swizzle(swizzle_panel)  # blocks panel by panel, for L2 reuse
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


def median_seconds(fn, repeat):
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1024)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    parser.add_argument("--block", type=int, nargs=3, default=[128, 128, 32],
                        metavar=("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    parser.add_argument("--stages", type=int, default=3, help="T.Pipelined num_stages")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (the median is printed)")
    parser.add_argument("--show-source", action="store_true", help="print the generated kernel source")
    parser.add_argument("--source-lines", type=int, default=60,
                        help="with --show-source, how many lines to print (0: all)")
    args = parser.parse_args(argv)

    M, N, K = args.m, args.n, args.k
    block_M, block_N, block_K = args.block
    np_dtype = np.float32 if args.dtype == "float32" else np.float16

    t0 = time.perf_counter()
    kernel = matmul(M, N, K, block_M, block_N, block_K, num_stages=args.stages, dtype=args.dtype)
    compile_s = time.perf_counter() - t0

    source = kernel.get_kernel_source()
    print(f"GEMM {M} x {N} x {K}, {args.dtype}, tiles {block_M} x {block_N} x {block_K}, "
          f"{args.stages} stages")
    print(f"compile time: {compile_s:.3f} s")
    print(f"kernel source: {len(source)} characters, {source.count(chr(10)) + 1} lines")
    if args.show_source:
        lines = source.splitlines()
        shown = lines if args.source_lines <= 0 else lines[:args.source_lines]
        print("-" * 72)
        print("\n".join(shown))
        if len(shown) < len(lines):
            print(f"... ({len(lines) - len(shown)} more lines)")
        print("-" * 72)

    rng = np.random.default_rng(0)
    a = rng.uniform(-1.0, 1.0, size=(M, K)).astype(np_dtype)
    b = rng.uniform(-1.0, 1.0, size=(K, N)).astype(np_dtype)

    c = np.asarray(kernel(a, b))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # Normwise relative error: the largest error relative to the largest
    # entry of the exact result.
    rel_err = float(np.max(np.abs(c.astype(np.float64) - ref)) / np.max(np.abs(ref)))
    # float32: accumulation rounding only; float16: one rounding of the output.
    tolerance = 1e-5 if args.dtype == "float32" else 1e-2
    ok = bool(np.all(np.isfinite(c))) and rel_err <= tolerance
    print(f"max relative error vs numpy (float64): {rel_err:.3e} (tolerance {tolerance:.0e}) "
          f"{'PASS' if ok else 'FAIL'}")

    # numpy has no fast float16 matmul, so its timing always uses float32.
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if kernel.target.startswith("cuda"):
        # Device tensors and CUDA events: the kernel's time, not the copies of numpy arrays.
        import torch
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        ours = tilelang.do_bench(lambda: kernel(ta, tb), warmup=3, rep=args.repeat) / 1e3
    else:
        ours = median_seconds(lambda: kernel(a, b), args.repeat)
    theirs = median_seconds(lambda: a32 @ b32, args.repeat)
    flops = 2.0 * M * N * K
    print(f"tilelang: {ours * 1e3:9.3f} ms  {flops / ours * 1e-9:8.2f} GFLOP/s  (median of {args.repeat})")
    print(f"numpy   : {theirs * 1e3:9.3f} ms  {flops / theirs * 1e-9:8.2f} GFLOP/s  (float32 matmul)")
    print(f"ratio   : {theirs / ours:.2f}x numpy's speed")

    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
