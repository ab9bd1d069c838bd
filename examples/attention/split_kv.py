"""Split-KV decoding's second step, shared by the decode examples: the partial outputs of
a sequence's splits merged by their share of the softmax mass,

    O = sum_s 2^(lse_s - lse) O_s,   lse = log2(sum_s 2^lse_s),

from O_part [batch, heads, num_split, dim] and LSE_part [batch, heads, num_split]
(float32, base-2 log-sum-exps; an empty split has lse -inf and weight 0), or (combine_items)
from a list of work items, a sequence's items being a range of it; merge_rows is the same
merge inside another kernel, for a tile of heads.
"""

import tilelang.language as T


def combine(batch, heads, num_split, dim, threads=128, dtype="float16"):
    """O[b, h] = the partial outputs weighted by their share of the total softmax mass."""
    accum = "float32"

    @T.prim_func
    def merge(
        O_part: T.Tensor((batch, heads, num_split, dim), accum),
        LSE_part: T.Tensor((batch, heads, num_split), accum),
        O: T.Tensor((batch, heads, dim), dtype),
    ):
        with T.Kernel(heads, batch, threads=threads) as (h, b):
            # Each thread weighs the few splits itself, then sums its columns over them.
            weight = T.alloc_local((num_split,), accum)
            lse_max = T.alloc_var(accum)
            total = T.alloc_var(accum)
            out = T.alloc_fragment((dim,), accum)
            lse_max = -T.infinity(accum)
            for s in T.unroll(num_split):
                weight[s] = LSE_part[b, h, s]
                lse_max = T.max(lse_max, weight[s])
            total = 0
            for s in T.unroll(num_split):
                weight[s] = T.exp2(weight[s] - lse_max)
                total += weight[s]
            T.clear(out)
            for s in T.unroll(num_split):
                for d in T.Parallel(dim):
                    out[d] += O_part[b, h, s, d] * (weight[s] / total)
            T.copy(out, O[b, h, :])

    return merge


def combine_items(batch, heads, max_items, dim, threads=128, dtype="float16", pdl=False):
    """O[b, h] from the partial outputs O_part [item, heads, dim] and LSE_part [item, heads] of
    sequence b's items batch_items[b] .. batch_items[b + 1] - 1. pdl: launched while the
    kernel before it finishes (programmatic dependent launch), waiting for its results
    before the first read."""
    accum = "float32"

    @T.prim_func
    def merge(
        O_part: T.Tensor((max_items, heads, dim), accum),
        LSE_part: T.Tensor((max_items, heads), accum),
        batch_items: T.Tensor((batch + 1,), "int32"),
        O: T.Tensor((batch, heads, dim), dtype),
    ):
        with T.Kernel(heads, batch, threads=threads) as (h, b):
            lse_max = T.alloc_var(accum)
            total = T.alloc_var(accum)
            weight = T.alloc_var(accum)
            out = T.alloc_fragment((dim,), accum)
            if pdl:
                T.pdl_sync()
            lse_max = -T.infinity(accum)
            for i in T.serial(batch_items[b], batch_items[b + 1]):
                lse_max = T.max(lse_max, LSE_part[i, h])
            total = 0
            for i in T.serial(batch_items[b], batch_items[b + 1]):
                total += T.exp2(LSE_part[i, h] - lse_max)
            T.clear(out)
            for i in T.serial(batch_items[b], batch_items[b + 1]):
                weight = T.exp2(LSE_part[i, h] - lse_max) / total
                for d in T.Parallel(dim):
                    out[d] += O_part[i, h, d] * weight
            T.copy(out, O[b, h, :])

    return merge


def merge_rows(rows, heads, dim):
    """A macro: out [rows, dim] (a fragment) = the merge of items first .. end - 1 of O_part
    [item, heads, dim] / LSE_part [item, heads] for heads row0 .. row0 + rows - 1 (rows past
    the last head read its values and are not to be stored); lse_max, total and weight are
    [rows] fragments it uses."""

    @T.macro
    def merge(LSE_part, O_part, first, end, row0, lse_max, total, weight, out):
        T.fill(lse_max, -T.infinity("float32"))
        for k in T.serial(first, end):
            for i in T.Parallel(rows):
                lse_max[i] = T.max(lse_max[i], LSE_part[k, T.min(row0 + i, heads - 1)])
        T.clear(total)
        for k in T.serial(first, end):
            for i in T.Parallel(rows):
                total[i] += T.exp2(LSE_part[k, T.min(row0 + i, heads - 1)] - lse_max[i])
        T.clear(out)
        for k in T.serial(first, end):
            for i in T.Parallel(rows):
                weight[i] = T.exp2(LSE_part[k, T.min(row0 + i, heads - 1)] - lse_max[i]) / total[i]
            for i, j in T.Parallel(rows, dim):
                out[i, j] += O_part[k, T.min(row0 + i, heads - 1), j] * weight[i]

    return merge
