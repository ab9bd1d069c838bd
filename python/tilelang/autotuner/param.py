"""What the autotuner is given (compile and profile arguments) and what it returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..utils.tensor import TensorSupplyType


@dataclass(frozen=True)
class CompileArgs:
    """How every candidate is compiled: the arguments of tilelang.compile."""

    out_idx: Any = None
    execution_backend: str = "auto"
    target: str = "auto"
    target_host: Any = None
    verbose: bool = False
    pass_configs: Any = None
    compile_flags: Any = None

    def compile_program(self, program):
        from ..jit import compile as tl_compile
        return tl_compile(program, out_idx=self.out_idx, target=self.target, target_host=self.target_host,
                          execution_backend=self.execution_backend, verbose=self.verbose,
                          pass_configs=self.pass_configs, compile_flags=self.compile_flags)

    def key_parts(self) -> dict:
        """What of these arguments changes the compiled kernels (verbose does not)."""
        return {"out_idx": self.out_idx, "target": str(self.target), "target_host": str(self.target_host),
                "execution_backend": self.execution_backend,
                "pass_configs": sorted((str(getattr(k, "value", k)), repr(v))
                                       for k, v in (self.pass_configs or {}).items()),
                "compile_flags": list(self.compile_flags or [])}


@dataclass(frozen=True)
class ProfileArgs:
    """How every candidate is checked and timed."""

    warmup: int = 25
    rep: int = 100
    timeout: int = 30
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Callable = None
    supply_prog: Callable = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable = None
    cache_input_tensors: bool = False
    backend: str = "event"

    def key_parts(self) -> dict:
        """What of these arguments changes which candidate wins: the checks and the
        inputs (the programs by name: their code is the caller's)."""
        def name(f):
            return None if f is None else f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', repr(f))}"
        return {"supply_type": str(self.supply_type), "ref_prog": name(self.ref_prog),
                "supply_prog": name(self.supply_prog), "manual_check_prog": name(self.manual_check_prog),
                "rtol": self.rtol, "atol": self.atol, "max_mismatched_ratio": self.max_mismatched_ratio,
                "skip_check": self.skip_check, "backend": self.backend}


# What happened to one candidate configuration.
OK = "ok"                    # compiled, checked (when a reference is given) and timed
REJECTED = "rejected"        # over a limit of the target, never compiled
PARSE_ERROR = "parse_error"  # the kernel factory raised for this configuration
COMPILE_ERROR = "compile_error"
WRONG_RESULT = "wrong_result"
RUN_ERROR = "run_error"      # raised while running or timing
TIMEOUT = "timeout"
SKIPPED = "skipped"          # not timed (early stop)


@dataclass
class CandidateRecord:
    index: int
    config: dict
    status: str = "pending"
    reason: str = ""
    latency: float | None = None
    compile_time: float | None = None
    worker: str = ""  # where it was timed (an executor's worker; "local" in this process)
    noise: float | None = None  # the spread of the middle half of its times, relative to the median

    def to_json(self) -> dict:
        return {"index": self.index, "config": self.config, "status": self.status, "reason": self.reason,
                "latency": self.latency, "compile_time": self.compile_time, "worker": self.worker,
                "noise": self.noise}

    @classmethod
    def from_json(cls, d: dict) -> "CandidateRecord":
        return cls(index=int(d["index"]), config=dict(d["config"]), status=str(d["status"]),
                   reason=str(d.get("reason", "")), latency=d.get("latency"), compile_time=d.get("compile_time"),
                   worker=str(d.get("worker", "")), noise=d.get("noise"))


@dataclass
class AutotuneResult:
    """The outcome of a tuning run: the best configuration, its latency (ms) and compiled
    kernel, the reference program's latency, and what happened to every candidate."""

    latency: float | None = None
    config: dict | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: Any = None
    kernel: Any = None
    records: list = field(default_factory=list)
    cache_hit: str | None = None    # None, "memory" or "disk"
    tuning_time: float = 0.0        # seconds, this run
    compile_seconds: float = 0.0    # wall time of the compile phase
    bench_seconds: float = 0.0      # wall time of the check + benchmark phase

    def failures(self) -> list:
        """The records of the candidates that did not run (rejected, failed, wrong, timed out)."""
        return [r for r in self.records if r.status not in (OK, SKIPPED)]

    def summary(self, top: int = 5, flops: float | None = None) -> str:
        """A table of the fastest candidates (TFLOP/s too when flops, the kernel's floating
        point operations, is given) and a count of the others by outcome."""
        ok = sorted((r for r in self.records if r.status == OK), key=lambda r: r.latency)
        lines = [f"autotune: {len(ok)} of {len(self.records)} configurations timed"
                 + (f" (cache {self.cache_hit})" if self.cache_hit else f" in {self.tuning_time:.2f} s "
                    f"(compile {self.compile_seconds:.2f} s, check + benchmark {self.bench_seconds:.2f} s)")]
        for rank, r in enumerate(ok[:top], 1):
            rate = ""
            if flops and r.latency:
                per_s = flops / (r.latency * 1e-3)
                rate = f"  {per_s / 1e12:8.2f} TFLOP/s" if per_s >= 1e12 else f"  {per_s / 1e9:8.2f} GFLOP/s"
            lines.append(f"  {rank:2d}. {r.latency:10.4f} ms{rate}  {r.config}")
        if self.ref_latency is not None:
            lines.append(f"  reference: {self.ref_latency:.4f} ms")
        noise = {}
        for r in ok:
            if r.noise is not None:
                noise.setdefault(r.worker.split(": ")[0] or "local", []).append(r.noise)
        for worker, values in sorted(noise.items()):
            values.sort()
            lines.append(f"  timed on {worker}: {len(values)} candidates, noise (middle half of the times "
                         f"over the median) {100 * values[len(values) // 2]:.1f}% median, "
                         f"{100 * values[-1]:.1f}% worst")
        counts = {}
        for r in self.records:
            if r.status != OK:
                counts[r.status] = counts.get(r.status, 0) + 1
        if counts:
            lines.append("  not timed: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return "\n".join(lines)
