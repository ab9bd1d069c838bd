"""The autotuner: compiles a kernel factory for every configuration of a search space in
parallel, checks each candidate against a reference, times them one at a time and keeps
the fastest. Results are cached in memory and on disk.

The phases of AutoTuner.run:
1. the factory is called for every configuration in this thread (the parser builds IR
   through the one IR builder, so it is not run concurrently); a configuration the factory
   rejects is recorded as parse_error;
2. the cache key is computed from the candidates' IR, the configuration space, the target,
   the toolchain and the compile and profile arguments; a hit returns the stored outcome and
   loads the best kernel (the kernel cache holds it), timing nothing;
3. the candidates are checked against the target's static limits (shared memory, threads
   per block: CUDA's, read from the lowering) and compiled in a thread pool over all cores:
   lowering, code generation and the compilers (NVRTC, the host compiler) run in C++
   without the GIL;
4. one candidate at a time is run on the inputs, compared with ref_prog's results and
   timed (CUDA events with the L2 cache flushed between repetitions on the GPU, the median
   of a host clock on the CPU);
5. every candidate's outcome (and the reason of each failure) lands in the result's records.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import os
import sys
import threading
import time
from typing import Callable

import numpy as np

from ..utils.tensor import TensorSupplyType
from . import cache as result_cache
from .capture import get_autotune_inputs
from .limits import check_static_limits
from .param import (COMPILE_ERROR, OK, PARSE_ERROR, REJECTED, RUN_ERROR, SKIPPED, TIMEOUT, WRONG_RESULT,
                    AutotuneResult, CandidateRecord, CompileArgs, ProfileArgs)

logger = logging.getLogger("tilelang.autotuner")


# ---------------------------------------------------------------------------- helpers
def get_available_cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:
        return os.cpu_count() or 1


def _env_number(name, default, kind=float):
    try:
        return kind(os.environ.get(name, default))
    except ValueError:
        return kind(default)


def num_compile_workers() -> int:
    """Threads compiling candidates: every core by default; TILELANG_AUTO_TUNING_CPU_COUNTS
    (a count), TILELANG_AUTO_TUNING_CPU_UTILITIES (a fraction) and
    TILELANG_AUTO_TUNING_MAX_CPU_COUNT (a cap) as upstream."""
    available = get_available_cpu_count()
    counts = _env_number("TILELANG_AUTO_TUNING_CPU_COUNTS", -1, int)
    if counts > 0:
        n = min(counts, available)
    else:
        n = max(1, int(available * _env_number("TILELANG_AUTO_TUNING_CPU_UTILITIES", 1.0)))
    cap = _env_number("TILELANG_AUTO_TUNING_MAX_CPU_COUNT", -1, int)
    return min(n, cap) if cap > 0 else n


def _quiet_default() -> bool:
    return os.environ.get("TILELANG_AUTO_TUNING_QUIET", "0") not in ("", "0")


def _normalise(value):
    """A JSON-able stand-in for a call argument: arrays by dtype and shape, IR by its text."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return ["tensor", str(value.dtype), [int(s) for s in value.shape]]
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return sorted([str(k), _normalise(v)] for k, v in value.items())
    if isinstance(value, TensorSupplyType):
        return str(value)
    return repr(value)


def _hashable(value):
    v = _normalise(value)
    return json.dumps(v, sort_keys=True, default=repr)


def _same_config(a: dict, b) -> bool:
    return json.loads(json.dumps(a, default=repr)) == b


def _reason(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' / '.join(lines[:3])}"[:500]


def _call_configs(configs, args, kwargs) -> list:
    """A callable configuration space called with the problem's arguments: the positional
    ones, and the keyword ones it takes (tuned parameters given by the caller are not its)."""
    try:
        params = inspect.signature(configs).parameters
    except (TypeError, ValueError):
        params = None
    if params is not None and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return list(configs(*args, **kwargs) or [])


class _Rejected(Exception):
    pass


class _WrongResult(Exception):
    pass


class _Timeout(Exception):
    pass


class _Skipped(Exception):
    pass


@dataclasses.dataclass
class _Measured:
    """A candidate's median time (ms) and the relative spread of its middle half."""
    latency: float
    noise: float | None = None


@dataclasses.dataclass
class _Remeasured:
    """A candidate timed again in this process after a worker timed it."""
    latency: float
    noise: float
    worker_latency: float
    worker: str


def _with_timeout(fn, timeout):
    """fn() in a daemon thread, given up after timeout seconds (None or <= 0: no limit)."""
    if not timeout or timeout <= 0:
        return fn()
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=target, name="tilelang-autotune-bench", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise _Timeout(f"did not finish within {timeout} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class _Progress:
    """A tqdm bar when tqdm is installed and output is wanted; else nothing."""

    def __init__(self, total, desc, quiet):
        self.bar = None
        if not quiet and total:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, desc=desc, leave=False)

    def update(self, **postfix):
        if self.bar is not None:
            self.bar.update(1)
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _torch_cuda(target):
    """torch, when the target is CUDA and torch (already imported by the caller) has a GPU."""
    torch = sys.modules.get("torch")
    if torch is None or not str(target).startswith("cuda"):
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        return None


def _time_cuda(torch, fn, warmup, rep):
    """Times of rep runs of fn() (ms) with CUDA events, the L2 cache flushed before each."""
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    for _ in range(max(0, int(warmup))):
        fn()
    torch.cuda.synchronize()
    events = []
    for _ in range(max(1, int(rep))):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def _time_host(fn, warmup, rep):
    """Times of rep runs of fn() (ms) by the host clock."""
    for _ in range(max(0, int(warmup))):
        fn()
    times = []
    for _ in range(max(1, int(rep))):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _median_and_noise(times):
    """The median, and the spread of the middle half relative to it (the measurement's noise)."""
    q25, q50, q75 = np.percentile(times, [25, 50, 75])
    return float(q50), (float((q75 - q25) / q50) if q50 > 0 else 0.0)


def _inputs_compatible(params, tensors) -> bool:
    from ..dtypes import numpy_dtype
    if len(params) != len(tensors):
        return False
    for p, t in zip(params, tensors):
        if p.kind != "buffer" or not hasattr(t, "shape"):
            continue
        static = [e.value if e.kind == "IntImm" else None for e in p.shape]
        if len(static) != len(t.shape) or any(s is not None and s != int(d) for s, d in zip(static, t.shape)):
            return False
        if isinstance(t, np.ndarray) and np.dtype(numpy_dtype(p.dtype)) != t.dtype:
            return False
    return True


# ---------------------------------------------------------------------------- the tuner
class AutoTuner:
    """Tunes fn (a function returning a @T.prim_func for keyword arguments drawn from
    configs) over configs (a list of dicts, or a callable returning one)::

        result = (AutoTuner.from_kernel(kernel=fn, configs=configs)
                  .set_compile_args(out_idx=[-1], target="auto")
                  .set_profile_args(ref_prog=ref, supply_type=tilelang.TensorSupplyType.Integer)
                  .run(warmup=3, rep=20))
        result.config, result.latency, result.kernel
    """

    _lock = threading.Lock()
    _memory_cache: dict = {}

    def __init__(self, fn: Callable, configs):
        from ..jit import _JITFactory
        self.compile_args = CompileArgs()
        self.profile_args = ProfileArgs()
        if isinstance(fn, _JITFactory):  # a @tilelang.jit factory: its compile options are the defaults
            opts = fn.options
            self.compile_args = CompileArgs(out_idx=opts.get("out_idx"), target=opts.get("target", "auto"),
                                            execution_backend=opts.get("execution_backend", "auto"),
                                            target_host=opts.get("target_host"), verbose=opts.get("verbose", False),
                                            pass_configs=opts.get("pass_configs"),
                                            compile_flags=opts.get("compile_flags"))
            fn = fn.fn
        self.fn = fn
        self.configs = configs
        self.quiet = _quiet_default()
        self.early_stop = None  # stop timing after this many candidates in a row do not improve
        self._kernel_args = ((), {})
        self._captured_inputs = None
        self.ref_latency_cache = None
        self.jit_input_tensors = None
        self._ref_outputs = None  # (inputs, reference outputs) for reused inputs
        self.executor = None  # where candidates compile and run: None is default_executor()
        self._device = None
        self._records = []
        self.last_noise = None  # of the latest candidate timed

    @classmethod
    def from_kernel(cls, kernel: Callable, configs):
        return cls(kernel, configs)

    def set_compile_args(self, out_idx=None, target=None, execution_backend=None, target_host=None,
                         verbose=None, pass_configs=None, compile_flags=None):
        """The arguments of tilelang.compile every candidate is compiled with. target None:
        $TILELANG_TARGET, else "auto"."""
        if target is None:
            target = os.environ.get("TILELANG_TARGET", "auto")
        if execution_backend is None:
            execution_backend = os.environ.get("TILELANG_EXECUTION_BACKEND", "auto")
        if verbose is None:
            verbose = os.environ.get("TILELANG_VERBOSE", "0").lower() in ("1", "true", "yes", "on")
        self.compile_args = CompileArgs(out_idx=out_idx, target=target, execution_backend=execution_backend,
                                        target_host=target_host, verbose=verbose, pass_configs=pass_configs,
                                        compile_flags=compile_flags)
        return self

    def set_profile_args(self, warmup: int = 25, rep: int = 100, timeout: int = 30,
                         supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable = None,
                         supply_prog: Callable = None, rtol: float = 1e-2, atol: float = 1e-2,
                         max_mismatched_ratio: float = 0.01, skip_check: bool = False,
                         manual_check_prog: Callable = None, cache_input_tensors: bool = False,
                         backend: str = "event"):
        """How candidates are checked and timed. Inputs come from an enclosing
        set_autotune_inputs block, else supply_prog(params), else the profiler's supply_type;
        each candidate's outputs are compared with `ref_prog(*inputs)` within rtol/atol (at most
        max_mismatched_ratio of the elements may differ), or handed with ref_prog's to
        manual_check_prog(outputs, reference)."""
        captured = get_autotune_inputs()
        if captured is not None:
            if supply_prog is not None:
                logger.warning("supply_prog is ignored inside a set_autotune_inputs block")
            self._captured_inputs = list(captured)
        elif supply_prog is not None and supply_type != TensorSupplyType.Auto:
            logger.warning("supply_type is ignored: supply_prog makes the inputs")
        self.profile_args = ProfileArgs(warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type,
                                        ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol, atol=atol,
                                        max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                                        manual_check_prog=manual_check_prog,
                                        cache_input_tensors=cache_input_tensors, backend=backend)
        return self

    def set_executor(self, executor):
        """Where candidates are compiled, checked and timed: an executor object
        (autotuner.executors.LocalExecutor(), RayExecutor(address)), "local", or "ray" /
        "ray://..." (a Ray cluster; "ray" alone starts a local Ray instance)."""
        from .executors import LocalExecutor, RayExecutor
        if isinstance(executor, str):
            if executor == "local":
                executor = LocalExecutor()
            elif executor == "ray":
                executor = RayExecutor()
            elif executor.startswith("ray://") or executor == "auto":
                executor = RayExecutor(address=executor)
            else:
                raise ValueError(f"autotune: unknown executor {executor!r} (use \"local\", \"ray\", "
                                 "\"ray://host:port\" or an executor object)")
        if not (hasattr(executor, "compile") and hasattr(executor, "bench")):
            raise TypeError(f"autotune: an executor needs compile() and bench(), got {type(executor).__name__}")
        self.executor = executor
        return self

    def set_kernel_parameters(self, args=(), kwargs=None):
        """The factory's arguments that are not tuned (the problem: shapes, dtypes)."""
        self._kernel_args = (tuple(args), dict(kwargs or {}))
        return self

    # ------------------------------------------------------------------ configurations
    def _config_list(self) -> list:
        configs = self.configs
        if callable(configs):
            configs = _call_configs(configs, *self._kernel_args)
        configs = list(configs or [])
        if not configs:
            raise ValueError("autotune: no configurations to tune (configs is empty)")
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            params = None
        takes_any = params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for c in configs:
            if not isinstance(c, dict):
                raise TypeError(f"autotune: a configuration must be a dict of keyword arguments, got {c!r}")
            if not takes_any:
                unused = sorted(set(c) - set(params))
                if unused:
                    raise ValueError(f"Unused keys in config: {set(unused)} (not parameters of "
                                     f"{getattr(self.fn, '__name__', self.fn)})")
        return configs

    def _make(self, config: dict):
        from ..ir import PrimFunc
        from ..jit import JITKernel
        args, kwargs = self._kernel_args
        out = self.fn(*args, **kwargs, **config)
        if isinstance(out, JITKernel):
            out = out.prim_func
        if not isinstance(out, PrimFunc):
            raise TypeError(f"the kernel factory returned {type(out).__name__}, not a @T.prim_func")
        return out

    # ------------------------------------------------------------------ cache
    def _cache_key(self, records, funcs, compile_args, warmup, rep) -> str:
        from ..jit.backends import backend_for
        from ..jit.kernel import _PACKAGE_VERSION, _core_identity
        try:
            toolchain = backend_for(compile_args.target).compiler_id()
        except Exception as e:  # noqa: BLE001 - no compiler: every compile fails, the key still holds
            toolchain = f"unavailable: {e}"
        candidates = []
        for r in records:
            f = funcs.get(r.index)
            candidates.append(hashlib.sha256(f.script().encode()).hexdigest() if f is not None
                              else f"{r.status}: {r.reason}")
        first = next(iter(funcs.values()), None)
        signature = None if first is None else [
            [p.name, p.kind, p.dtype, [repr(e) for e in (p.shape if p.kind == "buffer" else [])]]
            for p in first.params]
        args, kwargs = self._kernel_args
        parts = {
            "version": _PACKAGE_VERSION, "core": _core_identity(), "toolchain": toolchain,
            "function": f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', '')}",
            "kernel_args": _normalise([list(args), kwargs]), "signature": signature,
            "configs": _normalise([r.config for r in records]), "candidates": candidates,
            "compile": compile_args.key_parts(), "profile": self.profile_args.key_parts(),
            "warmup": warmup, "rep": rep, "early_stop": self.early_stop,
            "inputs": None if self._captured_inputs is None else _normalise(self._captured_inputs),
        }
        return result_cache.key_of(parts)

    def _from_cache(self, key, records, funcs, compile_args):
        if not result_cache.enabled():
            return None
        with self._lock:
            found = self._memory_cache.get(key)
        if found is not None:
            return dataclasses.replace(found, cache_hit="memory", tuning_time=0.0)
        data = result_cache.load(key)
        if data is None:
            if result_cache.entry_path(key).exists():
                logger.warning("autotune: the cached result %s is unreadable; tuning again", result_cache.entry_path(key))
            return None
        try:
            best = int(data["best_index"])
            stored = [CandidateRecord.from_json(d) for d in data["records"]]
            if not (0 <= best < len(records) and best in funcs and len(stored) == len(records)
                    and _same_config(records[best].config, data["config"])
                    and all(_same_config(r.config, s.config) for r, s in zip(records, stored))):
                raise ValueError("the entry does not match the configuration space")
            latency = float(data["latency"])
            ref_latency = None if data.get("ref_latency") is None else float(data["ref_latency"])
            kernel = compile_args.compile_program(funcs[best])
        except Exception as e:  # noqa: BLE001 - a corrupt entry is rebuilt
            logger.warning("autotune: the cached result %s is invalid (%s); tuning again",
                           result_cache.entry_path(key), _reason(e))
            return None
        config = records[best].config
        kernel.update_tuner_result(latency=latency, config=config, ref_latency=ref_latency)
        result = AutotuneResult(latency=latency, config=config, ref_latency=ref_latency,
                                libcode=kernel.get_kernel_source(), func=kernel.prim_func, kernel=kernel,
                                records=stored, cache_hit="disk")
        with self._lock:
            self._memory_cache[key] = result
        return result

    # ------------------------------------------------------------------ checking and timing
    def _inputs_for(self, kernel, profiler):
        pa = self.profile_args
        if self._captured_inputs is not None:
            return self._captured_inputs

        def make():
            if pa.supply_prog is not None:
                return list(pa.supply_prog(profiler._get_params(with_output=False)))
            return profiler._get_inputs(with_output=False)

        if pa.cache_input_tensors:
            params = profiler._get_params(with_output=False)
            if self.jit_input_tensors is None or not _inputs_compatible(params, self.jit_input_tensors):
                if self.jit_input_tensors is not None:
                    logger.warning("autotune: cached input tensors do not fit this candidate's parameters; "
                                   "making new ones")
                self.jit_input_tensors = make()
            return self.jit_input_tensors
        return make()

    def _reference(self, inputs):
        """ref_prog's outputs for inputs, computed once for inputs that are reused."""
        if self._ref_outputs is not None and self._ref_outputs[0] is inputs:
            return self._ref_outputs[1]
        ref = self.profile_args.ref_prog(*inputs)
        self._ref_outputs = (inputs, ref)
        return ref

    def _check_and_time(self, kernel, warmup, rep):
        from ..profiler import assert_close
        pa = self.profile_args
        torch = _torch_cuda(kernel.target)
        if torch is not None:
            torch.cuda.set_device(self._device)
        profiler = kernel.get_profiler(tensor_supply_type=pa.supply_type)
        inputs = self._inputs_for(kernel, profiler)
        if not pa.skip_check and pa.ref_prog is not None:
            ours = kernel(*inputs)
            ref = self._reference(inputs)
            try:
                if pa.manual_check_prog is not None:
                    pa.manual_check_prog(ours, ref)
                else:
                    outs = ours if isinstance(ours, (list, tuple)) else [ours]
                    refs = ref if isinstance(ref, (list, tuple)) else [ref]
                    if len(outs) != len(refs):
                        raise AssertionError(f"the kernel returns {len(outs)} outputs, ref_prog {len(refs)}")
                    for a, b in zip(outs, refs):
                        assert_close(a, b, rtol=pa.rtol, atol=pa.atol, max_mismatched_ratio=pa.max_mismatched_ratio)
            except Exception as e:  # noqa: BLE001 - any failed check is a wrong result
                raise _WrongResult(_reason(e)) from e

        def run_kernel():
            kernel(*inputs)

        times = _time_cuda(torch, run_kernel, warmup, rep) if torch is not None else _time_host(run_kernel, warmup, rep)
        latency, self.last_noise = _median_and_noise(times)
        if self.ref_latency_cache is None and pa.ref_prog is not None:
            try:
                ref_run = functools.partial(pa.ref_prog, *inputs)
                self.ref_latency_cache = float(np.median(_time_cuda(torch, ref_run, warmup, rep) if torch is not None
                                                         else _time_host(ref_run, warmup, rep)))
            except Exception as e:  # noqa: BLE001 - the reference's time is informative only
                logger.warning("autotune: timing ref_prog failed: %s", _reason(e))
        return latency

    # ------------------------------------------------------------------ run
    def run(self, warmup: int = 25, rep: int = 100, timeout: int = 30) -> AutotuneResult:
        """Tunes and returns the AutotuneResult (RuntimeError when no candidate works)."""
        from ..jit.backends import resolve_target
        t_start = time.perf_counter()
        if self._captured_inputs is None and get_autotune_inputs() is not None:
            self._captured_inputs = list(get_autotune_inputs())
        configs = self._config_list()
        compile_args = dataclasses.replace(self.compile_args, target=resolve_target(self.compile_args.target))
        target = compile_args.target
        records = [CandidateRecord(index=i, config=dict(c)) for i, c in enumerate(configs)]

        # 1. the candidates' IR, here (one IR builder)
        funcs = {}
        for r in records:
            try:
                funcs[r.index] = self._make(r.config)
            except Exception as e:  # noqa: BLE001 - recorded
                r.status, r.reason = PARSE_ERROR, _reason(e)

        # 2. the cache
        key = self._cache_key(records, funcs, compile_args, warmup, rep)
        cached = self._from_cache(key, records, funcs, compile_args)
        if cached is not None:
            return cached

        # 3. static limits and compilation, in parallel (the executor's workers)
        from .executors import default_executor
        executor = self.executor if self.executor is not None else default_executor()
        self._records = records
        torch = _torch_cuda(target)
        self._device = torch.cuda.current_device() if torch is not None else None
        saved_compile_args, self.compile_args = self.compile_args, compile_args
        try:
            return self._tune(executor, records, funcs, compile_args, key, target, warmup, rep, timeout, t_start)
        finally:
            self.compile_args = saved_compile_args
            if self.executor is None:
                executor.shutdown()

    def _tune(self, executor, records, funcs, compile_args, key, target, warmup, rep, timeout, t_start):
        t_compile = time.perf_counter()
        kernels = {}
        progress = _Progress(len(funcs), "Compiling configurations", self.quiet)
        for i, outcome in executor.compile(self, funcs, compile_args):
            r = records[i]
            if isinstance(outcome, _Rejected):
                r.status, r.reason = REJECTED, str(outcome)
            elif isinstance(outcome, BaseException):
                r.status, r.reason = COMPILE_ERROR, _reason(outcome)
            else:
                kernels[i], r.compile_time = outcome
            progress.update(compiled=len(kernels))
        progress.close()
        compile_seconds = time.perf_counter() - t_compile

        # 4. check and time (one candidate at a time on each of the executor's devices)
        t_bench = time.perf_counter()
        state = {"best": None, "since_best": 0}

        def skip():
            if self.early_stop and state["best"] is not None and state["since_best"] >= self.early_stop:
                return f"early stop: {state['since_best']} candidates without improvement"
            return None

        def is_best(i):
            best = state["best"]
            return best is None or records[i].latency < records[best].latency

        progress = _Progress(len(kernels), "Bench configurations", self.quiet)
        for i, outcome, worker in executor.bench(self, kernels, records, warmup, rep, timeout, skip):
            r = records[i]
            if isinstance(outcome, _Remeasured):  # the fastest again, here: this figure decides
                r.latency, r.noise = outcome.latency, outcome.noise
                r.worker = f"{outcome.worker}: {outcome.worker_latency:.4f} ms; {worker}"
                remeasured = state.setdefault("remeasured", [])
                remeasured.append(i)
                state["best"] = min(remeasured, key=lambda j: records[j].latency)
                continue
            r.worker = worker
            if isinstance(outcome, _Measured):
                r.latency, r.noise, r.status = outcome.latency, outcome.noise, OK
            elif isinstance(outcome, _Skipped):
                r.status, r.reason = SKIPPED, str(outcome)
            elif isinstance(outcome, _Timeout):
                r.status, r.reason = TIMEOUT, str(outcome)
            elif isinstance(outcome, _WrongResult):
                r.status, r.reason = WRONG_RESULT, str(outcome)
            else:
                r.status, r.reason = RUN_ERROR, _reason(outcome)
            if r.status == OK and is_best(i):
                state["best"], state["since_best"] = i, 0
            elif r.status != SKIPPED:
                state["since_best"] += 1
            best = state["best"]
            progress.update(best_latency=None if best is None else records[best].latency)
        progress.close()
        bench_seconds = time.perf_counter() - t_bench
        best = state["best"]

        if best is None:
            lines = [f"  {r.config}: {r.status}: {r.reason}" for r in records[:20]]
            raise RuntimeError("Auto-tuning failed: no configuration compiled and passed the check and the "
                               "benchmark:\n" + "\n".join(lines)
                               + ("\n  ..." if len(records) > 20 else ""))

        kernel = kernels[best].update_tuner_result(latency=records[best].latency, config=records[best].config,
                                                   ref_latency=self.ref_latency_cache)
        result = AutotuneResult(latency=records[best].latency, config=records[best].config,
                                ref_latency=self.ref_latency_cache, libcode=kernel.get_kernel_source(),
                                func=kernel.prim_func, kernel=kernel, records=records,
                                tuning_time=time.perf_counter() - t_start, compile_seconds=compile_seconds,
                                bench_seconds=bench_seconds)
        failed = result.failures()
        if failed and not self.quiet:
            logger.warning("autotune: %d of %d configurations did not run (%s); see result.records",
                           len(failed), len(records), ", ".join(sorted({r.status for r in failed})))
        logger.info("%s", result.summary())
        if result_cache.enabled():
            try:
                result_cache.store(key, {"best_index": best, "config": records[best].config,
                                         "latency": result.latency, "ref_latency": result.ref_latency,
                                         "target": target, "records": [r.to_json() for r in records]})
            except OSError as e:
                logger.warning("autotune: could not store the result: %s", e)
            with self._lock:
                self._memory_cache[key] = result
        return result

    def __call__(self) -> AutotuneResult:
        return self.run()


# ---------------------------------------------------------------------------- the decorator
class AutoTuneImpl:
    """What @tilelang.autotune(...) over @tilelang.jit(...) gives: called with the problem's
    arguments, it tunes the remaining (configured) ones once per distinct problem and returns
    the best compiled kernel."""

    def __init__(self, jit_impl, configs, warmup=25, rep=100, timeout=100, supply_type=TensorSupplyType.Auto,
                 ref_prog=None, supply_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01,
                 skip_check=False, manual_check_prog=None, cache_input_tensors=False, do_not_specialize=None,
                 early_stop=None):
        self.jit_impl = jit_impl
        self.configs = configs
        self.warmup, self.rep, self.timeout = warmup, rep, timeout
        self.profile = dict(supply_type=supply_type, ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol,
                            atol=atol, max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                            manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors)
        self.do_not_specialize = set(do_not_specialize or ())
        self.early_stop = early_stop
        self.last_result = None  # the AutotuneResult of the latest tuning run
        self._tuner_cache = {}
        functools.update_wrapper(self, jit_impl.fn)

    def get_tuner(self) -> AutoTuner:
        tuner = AutoTuner(self.jit_impl, self.configs)  # takes the jit's compile options
        tuner.set_profile_args(warmup=self.warmup, rep=self.rep, timeout=self.timeout, **self.profile)
        tuner.early_stop = self.early_stop
        return tuner

    def __call__(self, *args, **kwargs):
        fn = self.jit_impl.fn
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs)
        key = _hashable(sorted((k, v) for k, v in bound.arguments.items() if k not in self.do_not_specialize))
        if key in self._tuner_cache:
            return self._tuner_cache[key]
        configs = _call_configs(self.configs, args, kwargs) if callable(self.configs) else list(self.configs or [])
        tunable = {k for c in configs for k in c}
        given = tunable & set(bound.arguments)
        if given and given == tunable:
            logger.info("autotune: %s given every tuned parameter; compiling it without tuning", fn.__name__)
            kernel = self.jit_impl(*args, **kwargs)
        else:
            if given:  # tune the parameters the caller left open
                seen, narrowed = set(), []
                for c in configs:
                    rest = {k: v for k, v in c.items() if k not in given}
                    h = _hashable(rest)
                    if h not in seen:
                        seen.add(h)
                        narrowed.append(rest)
                configs = narrowed
            tuner = self.get_tuner()
            tuner.configs = configs
            tuner.set_kernel_parameters(args, kwargs)
            self.last_result = tuner.run(self.warmup, self.rep, self.timeout)
            kernel = self.last_result.kernel
        self._tuner_cache[key] = kernel
        return kernel

    def compile(self, *args, **kwargs):
        return self(*args, **kwargs)


def autotune(func=None, *, configs=None, warmup: int = 25, rep: int = 100, timeout: int = 100,
             supply_type: TensorSupplyType = TensorSupplyType.Auto, ref_prog: Callable = None,
             supply_prog: Callable = None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False, manual_check_prog: Callable = None,
             cache_input_tensors: bool = False, do_not_specialize=None, early_stop: int | None = None):
    """@tilelang.autotune(configs=...) above @tilelang.jit(...): tunes the kernel factory over
    configs (a list of dicts of its keyword arguments, or a callable taking the call's
    arguments and returning one) on each first call with a new problem."""
    if func is not None:
        raise ValueError("@tilelang.autotune needs arguments: @tilelang.autotune(configs=[...]) above @tilelang.jit")
    if configs is None:
        raise TypeError("tilelang.autotune: configs= (a list of dicts, or a callable returning one) is required")

    def decorator(impl):
        from ..jit import _JITFactory
        if not isinstance(impl, _JITFactory):
            if callable(impl) and not isinstance(impl, AutoTuneImpl):
                impl = _JITFactory(impl, {})  # a bare factory: tilelang.jit's defaults
            else:
                raise TypeError("@tilelang.autotune goes above @tilelang.jit on a function that returns a "
                                f"@T.prim_func, got {type(impl).__name__}")
        return AutoTuneImpl(impl, configs, warmup=warmup, rep=rep, timeout=timeout, supply_type=supply_type,
                            ref_prog=ref_prog, supply_prog=supply_prog, rtol=rtol, atol=atol,
                            max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                            manual_check_prog=manual_check_prog, cache_input_tensors=cache_input_tensors,
                            do_not_specialize=do_not_specialize, early_stop=early_stop)

    return decorator

