"""Runs fuzzer cases: case `index` of template `name` under `seed` draws its parameters
from numpy's generator seeded with (seed, the template's number, index), so a case replays
exactly from those three numbers on any machine.

As a script, for runs bigger than the test suite's:

    python tests/python/fuzz/runner.py --target cpu --seeds 0-9 --cases 100
    python tests/python/fuzz/runner.py --target webgpu --template copy --seed 3 --case 41
    python tests/python/fuzz/runner.py --target cuda-compile --cases 20   (no GPU: compiled only)
    python tests/python/fuzz/runner.py --target cuda --seeds 0-99 --jobs 14 --seconds 300
        (cases in 14 processes at once, templates interleaved, until 300 s in all)

prints one line per mismatch or error (its reproduction) and a summary per template.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(_HERE) not in sys.path:  # tests/python, for `import fuzz` as a script
    sys.path.insert(0, os.path.dirname(_HERE))

from fuzz.templates import TEMPLATES  # noqa: E402

OK, MISMATCH, ERROR, UNSUPPORTED = "ok", "mismatch", "error", "unsupported"


def case_rng(seed: int, name: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode()), index])


def reproduction(target: str, name: str, seed: int, index: int) -> str:
    return (f"python tests/python/fuzz/runner.py --target '{target}' --template {name} "
            f"--seed {seed} --case {index}")


@dataclass
class Outcome:
    status: str
    template: str
    seed: int
    index: int
    target: str
    params: dict = field(default_factory=dict)
    detail: str = ""

    def line(self) -> str:
        """One line: what failed, with what, and the command that replays it."""
        rerun = reproduction(self.target, self.template, self.seed, self.index)
        return (f"fuzz {self.status}: {self.template} on {self.target}, seed {self.seed} case {self.index}: "
                f"{self.detail} | params {self.params} | rerun: {rerun}")


def _unsupported_here(err, target: str) -> bool:
    """A clear refusal of the target (a kernel valid elsewhere that this target or adapter
    cannot run, e.g. over WebGPU's limits), not a failure."""
    from tilelang.errors import TileLangUnsupportedError
    return isinstance(err, TileLangUnsupportedError) and f"not supported on {target.split()[0]}" in str(err)


def compare(got, want, rtol, atol):
    """None when got matches want (NaN where want is NaN), else what differs."""
    got = np.asarray(got).astype(np.float64)
    # A masked element of want is one that may legitimately come out either way.
    skip = np.ma.getmaskarray(want) if np.ma.isMaskedArray(want) else None
    want = np.ma.getdata(want).astype(np.float64)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if skip is not None:
        bad &= ~skip
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} elements differ; first at {where}: got {got[where]!r}, "
            f"expected {want[where]!r} (rtol {rtol}, atol {atol})")


def _compile_only_cuda():
    """For target "cuda-compile" (no GPU here): the CUDA path up to loading the cubin."""
    from tilelang.jit import backends

    class Unloaded:
        def __init__(self, infos, cubin, source, report, params):
            self.source, self.report = source, report

        def lowering_report(self):
            return self.report

    backends.CudaExecutable = Unloaded
    return "cuda -arch=sm_90a"


def run_case(name: str, seed: int, index: int, target: str) -> Outcome:
    import tilelang
    template = TEMPLATES[name]
    rng = case_rng(seed, name, index)
    kind = "cuda" if target.startswith("cuda") else target.split()[0]
    params = template.draw(rng, kind)
    out = Outcome(OK, name, seed, index, target, params)
    try:
        if target == "cuda-compile":  # compiled, not run: any error still counts
            tilelang.compile(template.kernel(params), target=_compile_only_cuda())
            return out
        kernel = tilelang.compile(template.kernel(params), target=target)
        args = template.arguments(params, rng)
        before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # outputs may accumulate
        kernel(*args)
    except Exception as e:  # noqa: BLE001 - every exception is an outcome
        out.status = UNSUPPORTED if _unsupported_here(e, target) else ERROR
        out.detail = f"{type(e).__name__}: {' / '.join(str(e).splitlines()[:3])}"
        return out
    expected = template.expected(params, before)
    rtol, atol = template.tolerance(params)
    problems = []
    for i, want in expected.items():
        diff = compare(args[i], want, rtol, atol)
        if diff:
            problems.append(f"argument {i}: {diff}")
    if problems:
        out.status, out.detail = MISMATCH, "; ".join(problems)
    return out


def run_cases(names, seeds, cases, target, seconds=None, at_least=1, report=None):
    """Runs cases 0, 1, ... of each template under each seed, until `cases` per template
    and seed or, once `at_least` have run, `seconds` per template. Returns the outcomes."""
    outcomes = []
    kind = "cuda" if target.startswith("cuda") else target.split()[0]
    for name in names:
        if kind not in getattr(TEMPLATES[name], "targets", (kind,)):
            continue  # a template for other back ends (test_fuzz.py says which)
        start = time.monotonic()
        done = 0
        for seed in seeds:
            for index in range(cases):
                if seconds is not None and done >= at_least and time.monotonic() - start > seconds:
                    break
                o = run_case(name, seed, index, target)
                outcomes.append(o)
                done += 1
                if report and o.status in (MISMATCH, ERROR):
                    report(o.line())
    return outcomes


def _quiet_worker():
    import warnings
    from tilelang.errors import TileLangPerformanceWarning
    warnings.simplefilter("ignore", TileLangPerformanceWarning)  # slower paths are not failures here


def run_cases_parallel(names, seeds, cases, target, jobs, seconds=None, report=None):
    """The cases of run_cases in `jobs` processes (each with its own compiler and, on a GPU,
    its own context), templates interleaved so that a time limit cuts every template alike:
    no case starts after `seconds` in all. Returns the outcomes."""
    import concurrent.futures as cf
    import multiprocessing
    kind = "cuda" if target.startswith("cuda") else target.split()[0]
    names = [n for n in names if kind in getattr(TEMPLATES[n], "targets", (kind,))]
    work = [(n, seed, index) for seed in seeds for index in range(cases) for n in names]
    start, outcomes = time.monotonic(), []
    # spawn: a forked child would inherit the parent's GPU state
    with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                initializer=_quiet_worker) as pool:
        pending, queue = set(), iter(work)
        while True:
            while len(pending) < 2 * jobs and (seconds is None or time.monotonic() - start < seconds):
                item = next(queue, None)
                if item is None:
                    break
                pending.add(pool.submit(run_case, *item, target))
            if not pending:
                break
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in done:
                o = f.result()
                outcomes.append(o)
                if report and o.status in (MISMATCH, ERROR):
                    report(o.line())
    return outcomes


def summary(outcomes) -> str:
    lines = []
    for name in TEMPLATES:
        mine = [o for o in outcomes if o.template == name]
        if not mine:
            continue
        counts = {s: sum(o.status == s for o in mine) for s in (OK, MISMATCH, ERROR, UNSUPPORTED)}
        lines.append(f"{name:12s} {len(mine):6d} cases: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return "\n".join(lines)


def _ints(text: str):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--template", action="append", choices=sorted(TEMPLATES), help="default: all")
    ap.add_argument("--seed", "--seeds", dest="seeds", default="0", help="e.g. 0, 0-9 or 1,5,7")
    ap.add_argument("--case", type=int, help="run this one case only")
    ap.add_argument("--cases", type=int, default=50, help="cases per template and seed")
    ap.add_argument("--seconds", type=float, help="stop a template after this long (with --jobs: the whole run)")
    ap.add_argument("--jobs", type=int, default=1, help="cases run in this many processes at once")
    a = ap.parse_args(argv)
    import warnings
    from tilelang.errors import TileLangPerformanceWarning
    warnings.simplefilter("ignore", TileLangPerformanceWarning)  # slower paths are not failures here
    names = a.template or list(TEMPLATES)
    seeds = _ints(a.seeds)
    if a.case is not None:
        outcomes = [run_case(n, s, a.case, a.target) for n in names for s in seeds]
        for o in outcomes:
            print(o.line() if o.status != OK else f"fuzz ok: {o.template} seed {o.seed} case {o.index} {o.params}")
    elif a.jobs > 1:
        outcomes = run_cases_parallel(names, seeds, a.cases, a.target, a.jobs, a.seconds,
                                      report=lambda s: print(s, flush=True))
    else:
        outcomes = run_cases(names, seeds, a.cases, a.target, a.seconds, report=lambda s: print(s, flush=True))
    print(summary(outcomes))
    return 1 if any(o.status in (MISMATCH, ERROR) for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
