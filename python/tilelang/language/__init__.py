"""The kernel language: `import tilelang.language as T`."""
from __future__ import annotations

from ..layout.maps import Fragment, Layout
from ..parser.parser import Macro, macro
from . import fp8  # noqa: F401 - tilelang.language.fp8
from .eager import empty
from .bitwise import bitwise_and, bitwise_not, bitwise_or, bitwise_xor, shift_left, shift_right
from .alloc import alloc_buffer, alloc_fragment, alloc_global, alloc_local, alloc_shared, alloc_var, reshape, view
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .extern import CUDASourceCodeKernel, access_ptr, address_of, call_extern, evaluate, import_source, reinterpret
from ..layout import Fragment, Layout
from .hopper import (named_barrier_arrive, alloc_barrier, annotate_consumer_reg_alloc, annotate_producer_reg_dealloc, barrier_arrive,
                     barrier_wait, cp_async_barrier_noinc, create_list_of_mbarrier, dec_max_nreg, disable_warp_group_reg_alloc,
                     fence_proxy_async, get_mbarrier, inc_max_nreg, mbarrier_arrive, mbarrier_arrive_expect_tx,
                     mbarrier_expect_tx, mbarrier_wait_parity, no_set_max_nreg, set_max_nreg, sync_threads,
                     tma_store_arrive, tma_store_wait, ws)
from .cluster import (alloc_cluster_barrier, block_rank_in_cluster, cluster_arrive, cluster_arrive_relaxed,
                      cluster_sync, cluster_wait, copy_cluster)
from .kernel import (ClusterKernel, Kernel, annotate_min_blocks_per_sm, annotate_restrict_buffers, get_block_binding, get_block_bindings,
                     get_thread_binding, get_thread_bindings, pdl_sync, pdl_trigger, device_assert, sync_grid, thread_return,
                     use_swizzle, wait_wgmma)
from .simt import (comm_reducer, dp4a, shfl_down, shfl_sync, shfl_up, shfl_xor, tvm_thread_allreduce,
                   tvm_warp_shuffle, tvm_warp_shuffle_down, tvm_warp_shuffle_up)
from .frames import Else, If, Then, attr
from .loops import (Parallel, Persistent, Pipelined, Serial, break_loop, continue_loop, grid, loop_break, serial,
                    thread_binding, unroll,
                    vectorized)
from .math import (And, Cast, FloatImm, IntImm, Not, Or, Select, abs, cast, ceil, ceildiv, clamp, const, cos, erf,
                   exp, exp2, exp10, floor, floordiv, floormod, fmod, if_then_else, infinity, isinf, isnan,
                   log, log1p, log2, log10, max, max_value, min, min_value, pow, round, rsqrt, sigmoid, sin,
                   sqrt, tan, tanh, trunc, truncdiv, truncmod,
                   acos, acosh, asin, asinh, atan, atan2, atanh, clz, copysign, cosh, fma, hypot, isfinite, ldexp,
                   nearbyint, nextafter, popcount, sinh, align_up, cdiv, fabs, fmul, index_to_coordinates, likely)
from .prim_func import prim_func
from .warp import (activemask, all_sync, any_sync, ballot_sync, get_block_extent, get_block_extents, get_lane_idx,
                   get_thread_extent, get_thread_extents, get_warp_group_idx, get_warp_idx, get_warp_idx_sync,
                   shuffle_elect, sync_warp, syncthreads_and, syncthreads_count, syncthreads_or, warp_reduce_bitand,
                   warp_reduce_bitor, warp_reduce_max, warp_reduce_min, warp_reduce_sum, get_cluster_dims,
                   get_cluster_extent, get_cluster_extents, get_cluster_id, get_cluster_ids, get_cluster_size,
                   match_all_sync, match_any_sync, all_of, any_of, assume, ballot)
from .conv import c2d_im2col, im2col
from .tile_ops import (annotate_layout, atomic_add, atomic_addx2, atomic_addx4, atomic_load, atomic_max, atomic_min,
                       atomic_or, atomic_store, clear, copy, cummax, cumsum, fill, gemm, print, tma_copy, transpose,
                       wgmma_gemm,
                       reduce, reduce_absmax, reduce_abssum, reduce_bitand, reduce_bitor, reduce_bitxor, reduce_max,
                       reduce_min, reduce_sum)
from .types import (Buffer, FragmentBuffer, GemmWarpPolicy, LocalBuffer, SharedBuffer, StridedTensor, Tensor,
                    bfloat16, bool, double, dynamic, float,
                    dtype, float4_e2m1fn, float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32, float64, half,
                    int4, int8, int16, int32, int64, symbolic, uint4, uint8, uint16, uint32, uint64, boolean, int,
                    long, short, uint)

ceil_div = ceildiv
