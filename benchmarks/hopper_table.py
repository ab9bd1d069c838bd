"""Joins gemm_sweep.py (or attention_sweep.py) runs (JSON lines, one file per implementation) into one table: per
dtype and shape the best configuration of each implementation, the reference library, and
the ratios; geometric means per dtype; the cold compile times.

    python3 benchmarks/hopper_table.py ours.jsonl upstream.jsonl
    python3 benchmarks/hopper_table.py --variants a.jsonl b.jsonl ...   (every label a column:
        the best TFLOP/s and its configuration, for variants of ours against one reference)
"""
from __future__ import annotations

import json
import math
import sys
from collections import defaultdict


def main(paths):
    rows = []
    for p in paths:
        try:
            with open(p) as f:
                rows += [json.loads(line) for line in f if line.startswith("{")]
        except OSError as e:
            print(f"(no {p}: {e})")
    best = defaultdict(dict)  # (dtype, shape) -> label -> (tflops, cfg)
    compile_s = {}
    compiles = defaultdict(list)  # label -> seconds of each fresh compile in the sweep
    for r in rows:
        if r["shape"] == "cold compile":
            compile_s[r["label"]] = r["compile_s"]
            continue
        if r.get("compile_s", 0) > 0.02:  # below that it was a hit in the process's memory cache
            compiles[r["label"]].append(r["compile_s"])
        if "tflops" not in r:
            print(f"failed: {r['label']} {r['dtype']} {r['shape']} {r['cfg']}: {r.get('error')}")
            continue
        if r.get("err", 0) > 2e-2:
            print(f"WRONG: {r['label']} {r['dtype']} {r['shape']} {r['cfg']}: rel err {r['err']:.1e}")
            continue
        key = (r["dtype"], r["shape"])
        if r["label"] not in best[key] or r["tflops"] > best[key][r["label"]][0]:
            best[key][r["label"]] = (r["tflops"], r["cfg"])
    head = ("dtype", "shape", "ours", "cfg", "upstream", "reference", "ours/ref", "ours/upstream")
    table = [head]
    ratios = defaultdict(lambda: ([], []))
    for (dtype, shape), by in best.items():
        ours = by.get("ours")
        up = by.get("upstream")
        # The reference library: whichever other label measured this row (cuBLAS,
        # torch._scaled_mm, cuDNN SDPA...).
        others = [k for k in by if k not in ("ours", "upstream")]  # the first is the ratio's reference
        ref_name = others[0] if others else None
        ref = by.get(ref_name)
        cell = lambda v: f"{v[0]:.0f}" if v else "-"  # noqa: E731
        r_ref = ours[0] / ref[0] if ours and ref else None
        r_up = ours[0] / up[0] if ours and up else None
        if r_ref:
            ratios[dtype][0].append(r_ref)
        if r_up:
            ratios[dtype][1].append(r_up)
        table.append((dtype, shape, cell(ours), str(tuple(ours[1])) if ours else "-", cell(up),
                      ", ".join(f"{cell(by[k])} ({k})" for k in others) if ref else "-", f"{r_ref:.2f}" if r_ref else "-",
                      f"{r_up:.2f}" if r_up else "-"))
    geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")  # noqa: E731
    widths = [max(len(str(r[i])) for r in table) for i in range(len(head))]
    print("TFLOP/s, best of the same configuration list for ours and upstream TileLang")
    for r in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
    for dtype, (rr, ru) in ratios.items():
        print(f"geomean {dtype}: ours/ref {geo(rr):.3f} over {len(rr)} shapes; ours/upstream {geo(ru):.3f} "
              f"over {len(ru)}")
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    for label, xs in compiles.items():
        print(f"compile of one configuration, {label}: median {median(xs):.2f} s over {len(xs)}")
    if compiles.get("ours") and compiles.get("upstream"):
        print(f"compile speed-up over upstream: {median(compiles['upstream']) / median(compiles['ours']):.1f}x")


def variants(paths):
    best = defaultdict(dict)  # (dtype, shape) -> label -> (tflops, cfg)
    labels = []
    for p in paths:
        try:
            with open(p) as f:
                rows = [json.loads(line) for line in f if line.startswith("{")]
        except OSError as e:
            print(f"(no {p}: {e})")
            continue
        for r in rows:
            if r["label"] not in labels:
                labels.append(r["label"])
            if "tflops" not in r or r.get("err", 0) > 2e-2:
                print(f"{'failed' if 'tflops' not in r else 'WRONG'}: {r['label']} {r['dtype']} {r['shape']} {r['cfg']}: "
                      f"{r.get('error', r.get('err'))}")
                continue
            key = (r["dtype"], r["shape"])
            if r["label"] not in best[key] or r["tflops"] > best[key][r["label"]][0]:
                best[key][r["label"]] = (r["tflops"], r["cfg"])
    table = [("dtype", "shape", *labels)]
    for (dtype, shape), by in best.items():
        table.append((dtype, shape, *(f"{by[l][0]:.0f} {tuple(by[l][1]) if by[l][1] else ''}".strip() if l in by else "-"
                                      for l in labels)))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(table[0]))]
    print("TFLOP/s (best configuration)")
    for r in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--variants"]:
        variants(sys.argv[2:])
    else:
        main(sys.argv[1:])
