"""Where the autotuner compiles, checks and times its candidates.

LocalExecutor (the default) compiles in a thread pool of this process over all its cores
and checks and times candidates on this process's device, one at a time.

RayExecutor spreads both phases over a Ray cluster (`ray` from PyPI):
- compilation fans out to the cluster's CPU workers: a worker builds the candidate's IR
  from the factory, checks the static limits and compiles it into its own kernel cache; the
  cache entry's files come back and are written into this process's kernel cache, so that
  loading the candidate here is a disk hit (a worker with another toolchain gives another
  key: the candidate is then compiled here, and the record says so);
- checking and timing go to benchmark workers, one per GPU of the cluster for CUDA targets
  (Ray gives each its own device), one CPU worker otherwise; candidates are handed out as
  workers finish;
- the best few are timed again in this process, on one device, before the best is chosen,
  so that the choice does not rest on the differences between devices; each record keeps
  the worker's own figure in its `worker` field.

An executor's two methods are generators: compile() yields (index, (kernel, seconds) or the
exception), bench() yields (index, a tuner._Measured (median ms and noise) or the exception,
the worker's name).
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import time

from . import tuner as _tuner

__all__ = ["LocalExecutor", "RayExecutor", "default_executor"]


class LocalExecutor:
    """Compiles in a thread pool of this process (lowering, code generation and the
    compilers run in C++ without the GIL); checks and times here, one candidate at a time."""

    name = "local"

    def __init__(self, compile_workers: int | None = None):
        self.compile_workers = compile_workers

    def compile(self, tuner, funcs, compile_args):
        torch = _tuner._torch_cuda(compile_args.target)
        device = tuner._device

        def build(i):
            if torch is not None:
                torch.cuda.set_device(device)
            return _build_here(funcs[i], compile_args)

        workers = self.compile_workers or _tuner.num_compile_workers()
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                   thread_name_prefix="tilelang-autotune") as pool:
            futures = {pool.submit(build, i): i for i in funcs}
            for future in concurrent.futures.as_completed(futures):
                try:
                    yield futures[future], future.result()
                except Exception as e:  # noqa: BLE001 - the caller records it
                    yield futures[future], e

    def bench(self, tuner, kernels, records, warmup, rep, timeout, skip):
        for i in sorted(kernels):
            why = skip()
            if why:
                yield i, _tuner._Skipped(why), self.name
                continue
            try:
                latency = _tuner._with_timeout(functools.partial(tuner._check_and_time, kernels[i], warmup, rep),
                                               timeout)
            except Exception as e:  # noqa: BLE001 - the caller records it
                yield i, e, self.name
                continue
            yield i, _tuner._Measured(latency, tuner.last_noise), self.name

    def shutdown(self):
        pass


def _build_here(func, compile_args):
    t0 = time.perf_counter()
    why = _tuner.check_static_limits(func, compile_args.target, compile_args.pass_configs)
    if why:
        raise _tuner._Rejected(why)
    return compile_args.compile_program(func), time.perf_counter() - t0


# ---------------------------------------------------------------------------- Ray
def _entry_files(key: str) -> dict:
    """{file name: bytes} of a complete kernel cache entry (meta.json included)."""
    from ..jit import cache
    d = cache.entry_dir(key)
    if not (d / "meta.json").exists():
        return {}
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name != "lock"
            and not p.name.endswith(".tmp")}


def _install_entry(key: str, files: dict):
    """Writes a cache entry built elsewhere into this process's kernel cache, its metadata
    last (an entry is complete only when meta.json lists every file's hash)."""
    from ..jit import cache
    if not files or not cache.enabled() or cache.lookup(key, [n for n in files if n != "meta.json"]):
        return
    with cache.entry_lock(key):
        d = cache.entry_dir(key)
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            if name != "meta.json":
                cache.write_atomic(d / name, data)
        if "meta.json" in files:
            cache.write_atomic(d / "meta.json", files["meta.json"])


def _make_program(recipe, config):
    fn, kernel_args = recipe
    probe = _tuner.AutoTuner(fn, [config])
    probe.set_kernel_parameters(*kernel_args)
    return probe._make(config)


def _remote_compile(recipe, compile_args, config):
    """On a Ray worker: builds and compiles one candidate; returns (status, reason or the
    cache key, the entry's files, seconds). Failures travel as values, not exceptions."""
    from .param import COMPILE_ERROR, OK, REJECTED
    t0 = time.perf_counter()
    try:
        kernel, _ = _build_here(_make_program(recipe, config), compile_args)
    except _tuner._Rejected as e:
        return REJECTED, str(e), {}, time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - recorded by the caller
        return COMPILE_ERROR, _tuner._reason(e), {}, time.perf_counter() - t0
    return OK, kernel.cache_key, _entry_files(kernel.cache_key), time.perf_counter() - t0


class _BenchWorker:
    """On a Ray worker: a tuner with the caller's compile and profile arguments and inputs,
    checking and timing one candidate per call on the worker's device."""

    def __init__(self, recipe, compile_args, profile_args, captured_inputs):
        fn, kernel_args = recipe
        self.tuner = _tuner.AutoTuner(fn, [{}])
        self.tuner.set_kernel_parameters(*kernel_args)
        self.tuner.compile_args = compile_args
        self.tuner.profile_args = profile_args
        self.tuner._captured_inputs = captured_inputs
        torch = _tuner._torch_cuda(compile_args.target)
        self.tuner._device = torch.cuda.current_device() if torch is not None else None
        self.name = f"ray:{os.uname().nodename}:{os.getpid()}"
        if torch is not None:
            self.name += f":cuda{self.tuner._device}"

    def run(self, index, config, key, files, warmup, rep, timeout):
        _install_entry(key, files)
        try:
            kernel = self.tuner.compile_args.compile_program(self.tuner._make(config))
            latency = _tuner._with_timeout(functools.partial(self.tuner._check_and_time, kernel, warmup, rep),
                                           timeout)
        except Exception as e:  # noqa: BLE001 - recorded by the caller
            return index, e, self.name, self.tuner.ref_latency_cache
        return index, _tuner._Measured(latency, self.tuner.last_noise), self.name, self.tuner.ref_latency_cache


class RayExecutor:
    """Compiles on a Ray cluster's CPU workers and times on its GPU workers (see the module's
    docstring). address: the cluster ("auto", "ray://host:10001", ...); None starts a local
    Ray instance on this machine. bench_workers: how many benchmark workers (default: the
    cluster's GPUs for CUDA targets, else 1). remeasure: how many of the fastest candidates
    are timed again here before the best is chosen (0: none)."""

    name = "ray"

    def __init__(self, address: str | None = None, bench_workers: int | None = None, remeasure: int = 3,
                 init_kwargs: dict | None = None):
        try:
            import ray
        except ImportError as e:
            raise ImportError("RayExecutor needs Ray: pip install ray") from e
        self.ray = ray
        self.address = address
        self.bench_workers = bench_workers
        self.remeasure = remeasure
        self._started_here = False
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
            kwargs.update(init_kwargs or {})
            ray.init(address=address, **kwargs)
            self._started_here = True

    def _recipe(self, tuner):
        return (tuner.fn, tuner._kernel_args)

    def compile(self, tuner, funcs, compile_args):
        from .param import OK, REJECTED
        ray = self.ray
        task = ray.remote(num_cpus=1)(_remote_compile)
        recipe = ray.put(self._recipe(tuner))
        configs = {i: tuner._records[i].config for i in funcs}
        pending = {task.remote(recipe, compile_args, configs[i]): i for i in funcs}
        self.compiled_here = []
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(done[0])
            try:
                status, info, files, seconds = ray.get(done[0])
            except Exception as e:  # noqa: BLE001 - a worker died: recorded
                yield i, e
                continue
            if status == REJECTED:
                yield i, _tuner._Rejected(info)
            elif status != OK:
                yield i, RuntimeError(info)
            else:
                _install_entry(info, files)
                try:
                    kernel = compile_args.compile_program(funcs[i])  # a disk hit when the keys agree
                except Exception as e:  # noqa: BLE001 - recorded
                    yield i, e
                    continue
                if kernel.cache_key != info:
                    self.compiled_here.append(i)
                yield i, (kernel, seconds)

    def _bench_worker_count(self, target):
        if self.bench_workers:
            return self.bench_workers
        if str(target).startswith("cuda"):
            return max(1, int(self.ray.cluster_resources().get("GPU", 0)))
        return 1

    def bench(self, tuner, kernels, records, warmup, rep, timeout, skip):
        ray = self.ray
        target = tuner.compile_args.target
        cuda = str(target).startswith("cuda")
        n = min(self._bench_worker_count(target), max(1, len(kernels)))
        worker_class = ray.remote(num_gpus=1 if cuda else 0, num_cpus=0 if cuda else 1)(_BenchWorker)
        recipe = self._recipe(tuner)
        workers = [worker_class.remote(recipe, tuner.compile_args, tuner.profile_args, tuner._captured_inputs)
                   for _ in range(n)]
        queue = sorted(kernels)
        running = {}
        measured = {}

        def submit(worker):
            while queue:
                i = queue.pop(0)
                why = skip()
                if why:
                    return i, why
                key = kernels[i].cache_key
                ref = worker.run.remote(i, records[i].config, key, _entry_files(key), warmup, rep, timeout)
                running[ref] = (worker, i)
                return None
            return None

        skipped = []
        for w in workers:
            s = submit(w)
            if s:
                skipped.append(s)
        for i, why in skipped:
            yield i, _tuner._Skipped(why), self.name
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            worker, i = running.pop(done[0])
            try:
                i, outcome, name, ref_latency = ray.get(done[0])
            except Exception as e:  # noqa: BLE001 - the worker died: recorded for its candidate
                yield i, e, "ray"
                worker = worker_class.remote(recipe, tuner.compile_args, tuner.profile_args, tuner._captured_inputs)
            else:
                if ref_latency is not None and tuner.ref_latency_cache is None:
                    tuner.ref_latency_cache = ref_latency
                if isinstance(outcome, _tuner._Measured):
                    measured[i] = (outcome.latency, name)
                yield i, outcome, name
            s = submit(worker)
            if s:
                yield s[0], _tuner._Skipped(s[1]), self.name
        for w in workers:
            ray.kill(w)
        # The fastest few again, here on one device: the choice compares like with like.
        for i, _ in sorted(measured.items(), key=lambda kv: kv[1][0])[:self.remeasure]:
            try:
                latency = _tuner._with_timeout(functools.partial(tuner._check_and_time, kernels[i], warmup, rep),
                                               timeout)
            except Exception as e:  # noqa: BLE001 - recorded
                yield i, e, "local (re-measured)"
                continue
            yield i, _tuner._Remeasured(latency, tuner.last_noise, measured[i][0], measured[i][1]), \
                "local (re-measured)"

    def shutdown(self):
        if self._started_here and self.ray.is_initialized():
            self.ray.shutdown()


def default_executor():
    """RayExecutor at $TILELANG_AUTOTUNE_RAY_ADDRESS when it is set ("local" starts a Ray
    instance on this machine), else LocalExecutor."""
    address = os.environ.get("TILELANG_AUTOTUNE_RAY_ADDRESS", "").strip()
    if address:
        return RayExecutor(address=None if address == "local" else address)
    return LocalExecutor()
