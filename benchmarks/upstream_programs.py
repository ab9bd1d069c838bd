"""Runs upstream TileLang's own programs, unchanged, against this project and classifies how
each one ends.

The programs (upstream examples and the tilelang-puzzles solutions) live under
.upstream_programs/<repo>/<path>, listed in .upstream_programs/MANIFEST.txt (repo, path, commit,
kind); they are upstream's code and never committed here. Each program runs in its own
process with its folder as the working directory, `import tilelang` resolving to this
project, and a time limit. The outcome is one of:

  passed          exit status 0 and no mismatch printed by the program's own check
  missing name    an AttributeError / ImportError naming a tilelang (or tvm) name, or a call
                  into tilelang with an argument our function lacks
  compiler error  a TileLang* exception: its type and first line
  needs a GPU     torch or the runtime found no CUDA device (the expected stop without one)
  wrong result    an AssertionError from the program's check, or a mismatch it printed
  missing package a third-party module the program imports is not installed
  timeout         still running at the limit
  crash           killed by a signal
  other           anything else: its type and first line

The target is chosen through TILELANG_TARGET, the variable upstream's "auto" target honours
too: --target cuda compiles for the device (for sm_90a when there is none, so the CUDA
lowering and NVRTC still run), --target cpu for the CPU back end.

  python benchmarks/upstream_programs.py --target cuda --out build/programs.jsonl
  python benchmarks/upstream_programs.py --target cpu --cpu-tensors --only tilelang-puzzles --jobs 2
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / ".upstream_programs"

OUTCOMES = ["passed", "missing name", "compiler error", "needs a GPU", "wrong result",
            "missing package", "timeout", "crash", "other"]

# Messages that mean "no usable CUDA device here", from torch, the CUDA runtime and driver,
# and this project's own runtime.
GPU_PATTERNS = re.compile("|".join([
    r"Found no NVIDIA driver", r"Torch not compiled with CUDA", r"CUDA is not available",
    r"No CUDA GPUs are available", r"cudaErrorNoDevice", r"CUDA_ERROR_NO_DEVICE",
    r"no CUDA-capable device", r"CUDA driver", r"needs a CUDA device", r"no CUDA device",
    r"cudaErrorInsufficientDriver", r"CUDA_ERROR_NOT_INITIALIZED", r"nvidia-smi",
    r"libcuda\.so", r"cuInit",
]), re.IGNORECASE)

# A check that prints its verdict instead of raising (the puzzles' test_puzzle, the grouped
# GEMM example, similarity checks that only warn).
MISMATCH_PATTERNS = re.compile(r"❌|Results match: False|\bmismatch\b|\x1b\[91m.*Error|"
                               r"similarity check failed", re.IGNORECASE)


# --------------------------------------------------------------------------- manifest
def read_manifest(path: Path):
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        repo, rel, commit, kind = line.split("\t")
        rows.append({"repo": repo, "path": rel, "commit": commit, "kind": kind})
    return rows


def select(rows, patterns):
    programs = [r for r in rows if r["kind"] == "program"]
    if not patterns:
        return programs

    def matches(row):
        name = f"{row['repo']}/{row['path']}"
        return any(p in name or fnmatch.fnmatch(name, p) for p in patterns)

    return [r for r in programs if matches(r)]


# --------------------------------------------------------------------------- target
def target_string(target: str, python: str) -> str:
    """TILELANG_TARGET for a --target value: a bare "cuda" gets sm_90a when no device is
    visible, so the CUDA lowering still runs."""
    if target != "cuda":
        return target
    probe = subprocess.run([python, "-c", "from tilelang import _C; print(int(_C.cuda_device_available()))"],
                           env=child_env_base(), capture_output=True, text=True, timeout=120)
    has_device = probe.returncode == 0 and probe.stdout.strip().endswith("1")
    return "cuda" if has_device else "cuda -arch=sm_90a"


def child_env_base():
    env = dict(os.environ)
    paths = [str(ROOT / "python")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


# --------------------------------------------------------------------------- one program
# The child: runs the program as __main__ (as `python program.py` would) and records the
# exception it ends with, so the parent classifies from the exception object rather than from
# the printed traceback. It also counts the kernels built, to tell how far a program got.
CHILD = r'''
import json, os, runpy, sys, traceback
report_path, program = sys.argv[1], sys.argv[2]
sys.argv = [program] + sys.argv[3:]
sys.path[0] = os.path.dirname(os.path.abspath(program))
state = {"lowered": 0, "compiled": 0}
# Counts kernels lowered and kernels through NVRTC. The wrappers are compiled with a file
# name inside the tilelang package so that the compiler's search for the user's frame (error
# locations) passes over them as it does over the package's own frames.
try:
    import tilelang
    from tilelang import _C
    _shim = os.path.join(os.path.dirname(tilelang.__file__), "_upstream_programs_counters.py")
    _src = (
        "def counting(fn, key):\n"
        "    def wrapped(*a, **kw):\n"
        "        out = fn(*a, **kw)\n"
        "        state[key] += 1\n"
        "        return out\n"
        "    return wrapped\n")
    _ns = {"state": state}
    exec(compile(_src, _shim, "exec"), _ns)
    for _name, _key in (("lower", "lowered"), ("nvrtc_compile", "compiled")):
        if hasattr(_C, _name):
            setattr(_C, _name, _ns["counting"](getattr(_C, _name), _key))
except Exception:
    pass

# --cpu-tensors: the program's torch "cuda" tensors are made on the CPU instead (factories,
# .cuda(), .to("cuda"), generators), and torch.cuda's synchronize and events work on the
# host clock, so a program written for a GPU runs unchanged on the CPU target.
if os.environ.get("TL_PROGRAMS_CPU_TENSORS"):
    import functools, time as _time
    import torch

    def _host(device):
        if isinstance(device, torch.device) and device.type == "cuda":
            return torch.device("cpu")
        if isinstance(device, str) and device.startswith("cuda"):
            return "cpu"
        if isinstance(device, int) and not isinstance(device, bool):
            return "cpu"
        return device

    def _redirect(fn):
        @functools.wraps(fn)
        def wrapped(*a, **kw):
            if "device" in kw:
                kw["device"] = _host(kw["device"])
            return fn(*a, **kw)
        return wrapped

    for _name in ("randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "zeros", "ones",
                  "empty", "full", "arange", "linspace", "tensor", "as_tensor", "zeros_like", "ones_like",
                  "empty_like", "full_like", "eye", "randperm", "empty_strided"):
        if hasattr(torch, _name):
            setattr(torch, _name, _redirect(getattr(torch, _name)))
    # A class still (torch annotates with `torch.Generator | None`), made on the host.
    _Generator = torch.Generator

    class _HostGenerator(_Generator):
        def __new__(cls, device="cpu"):
            return _Generator.__new__(cls, _host(device))

        def __init__(self, device="cpu"):
            pass
    torch.Generator = _HostGenerator
    torch.Tensor.cuda = lambda self, *a, **kw: self
    _to = torch.Tensor.to

    def _tensor_to(self, *a, **kw):
        a = tuple(_host(x) if isinstance(x, (str, torch.device)) else x for x in a)
        if "device" in kw:
            kw["device"] = _host(kw["device"])
        return _to(self, *a, **kw)
    torch.Tensor.to = _tensor_to

    class _HostEvent:
        def __init__(self, *a, **kw):
            self.t = None
        def record(self, *a, **kw):
            self.t = _time.perf_counter()
        def synchronize(self):
            pass
        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3
    torch.cuda.Event = _HostEvent
    torch.cuda.synchronize = lambda *a, **kw: None

def frames_of(exc):
    out = []
    for fs in traceback.extract_tb(exc.__traceback__):
        out.append([fs.filename, fs.lineno, fs.name])
    return out

def describe(exc):
    cls = type(exc)
    info = {"type": cls.__name__, "module": cls.__module__,
            "mro": [c.__name__ for c in cls.__mro__],
            "message": str(exc), "frames": frames_of(exc)}
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        info["name"] = getattr(exc, "name", None)
        if obj is None:
            info["owner"] = None
        elif isinstance(obj, type(sys)):
            info["owner"] = obj.__name__
        elif isinstance(obj, type):
            info["owner"] = obj.__module__ + "." + obj.__qualname__
        else:
            info["owner"] = type(obj).__module__ + "." + type(obj).__qualname__
    if isinstance(exc, ImportError):
        info["name"] = exc.name
    return info

code = 0
try:
    runpy.run_path(program, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    with open(report_path, "w") as f:
        json.dump({"exit": code, **state}, f)
    raise
except BaseException as exc:
    chain, e = [], exc
    while e is not None and len(chain) < 8:
        chain.append(describe(e))
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    with open(report_path, "w") as f:
        json.dump({"exception": chain, **state}, f)
    raise
with open(report_path, "w") as f:
    json.dump({"exit": 0, **state}, f)
'''


RUNNING = set()  # the programs' processes now running


def stop_running(signum, frame):
    """Ends the programs still running (each leads its own process group) when this script is
    stopped, e.g. by an overall time limit, then exits."""
    for proc in list(RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(128 + signum)


def run_one(row, args, tl_target):
    program = PROGRAMS / row["repo"] / row["path"]
    env = child_env_base()
    # A program that imports a sibling of its checkout's root (the puzzles' common.utils)
    # finds it as it would when run from that checkout.
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(PROGRAMS / row["repo"])])
    env["TILELANG_TARGET"] = tl_target
    if args.cpu_tensors:
        env["TL_PROGRAMS_CPU_TENSORS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        cmd = [args.python, "-X", "faulthandler", str(child), str(report), str(program)]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=program.parent, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        RUNNING.add(proc)
        try:
            output, _ = proc.communicate(timeout=args.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            # the program's own process group: it may have started workers
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        finally:
            RUNNING.discard(proc)
        seconds = time.monotonic() - t0
        text = output.decode("utf-8", "replace")
        data = json.loads(report.read_text()) if report.exists() else {}
    result = classify(proc.returncode, timed_out, text, data)
    result.update({"program": f"{row['repo']}/{row['path']}", "repo": row["repo"], "path": row["path"],
                   "commit": row["commit"], "target": tl_target, "returncode": proc.returncode,
                   "seconds": round(seconds, 1), "kernels_lowered": data.get("lowered", 0),
                   "kernels_compiled": data.get("compiled", 0),
                   "tail": text[-3000:]})
    if args.logs:
        log = Path(args.logs) / (result["program"].replace("/", "__") + ".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(text)
    return result


# --------------------------------------------------------------------------- classification
def first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _located(line: str) -> str:
    """A compiler message's first line with its `/path/file.py:12: error:` prefix moved to
    the end as `(file.py:12)`."""
    m = re.match(r"(.+?):(\d+): error: (.*)", line)
    return f"{m.group(3)} ({os.path.basename(m.group(1))}:{m.group(2)})" if m else line


def _first_sentence(line: str) -> str:
    return re.split(r"(?<=[a-z0-9)])(?:\. |; )", line, maxsplit=1)[0]


def in_tilelang(frames) -> bool:
    tl = str(ROOT / "python" / "tilelang")
    return bool(frames) and frames[-1][0].startswith(tl)


def short_frame(frames) -> str:
    if not frames:
        return ""
    path, line, name = frames[-1]
    tl = str(ROOT / "python") + os.sep
    if path.startswith(tl):
        path = path[len(tl):]
    else:
        path = os.path.basename(path)
    return f"{path}:{line} in {name}"


def is_tilelang_name(name) -> bool:
    return isinstance(name, str) and (name == "tilelang" or name.startswith("tilelang.")
                                      or name == "tvm" or name.startswith("tvm."))


def classify_exception(chain, text):
    exc = chain[0]
    mro, msg, frames = exc["mro"], exc["message"], exc.get("frames", [])
    everything = " ".join(e["message"] for e in chain)
    # GPU stops first: the program got as far as a device could take it.
    # (this project's own "no usable CUDA device" is an Unsupported error; other TileLang
    # errors that mention CUDA are compile errors)
    if GPU_PATTERNS.search(everything) and (not exc["type"].startswith("TileLang")
                                            or exc["type"] == "TileLangUnsupportedError"):
        return "needs a GPU", f"{exc['type']}: {_first_sentence(_located(first_line(msg)))}"
    if exc["type"] == "AttributeError" and (is_tilelang_name(exc.get("owner")) or
                                            re.search(r"'tilelang[\w.]*'|'tvm[\w.]*'", msg)):
        owner = exc.get("owner") or ""
        return "missing name", f"{owner}.{exc.get('name')}" if exc.get("name") else first_line(msg)
    if "ImportError" in mro:
        missing = re.search(r"cannot import name '([^']+)' from '([^']+)'", msg)
        if missing and is_tilelang_name(missing.group(2)):
            return "missing name", f"{missing.group(2)}.{missing.group(1)}"
        if is_tilelang_name(exc.get("name")):
            return "missing name", f"module {exc.get('name')}"
        if exc["type"] == "ModuleNotFoundError":
            return "missing package", first_line(msg)
    if exc["type"] == "TypeError" and in_tilelang(frames) and re.search(
            r"unexpected keyword argument|positional argument|required .*argument", msg):
        return "missing name", f"argument: {first_line(msg)} ({short_frame(frames)})"
    if any(m.startswith("TileLang") and m.endswith("Error") for m in mro):
        return "compiler error", f"{exc['type']}: {_located(first_line(msg))}"
    if exc["type"] == "AssertionError" or "AssertionError" in mro:
        return "wrong result", f"{exc['type']}: {first_line(msg) or short_frame(frames)}"
    where = f" ({short_frame(frames)})" if in_tilelang(frames) else ""
    return "other", f"{exc['type']}: {first_line(msg)}{where}"


def classify(returncode, timed_out, text, data):
    if timed_out:
        return {"outcome": "timeout", "detail": "", "exception": None}
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.Signals._value2member_map_ else str(returncode)
        fault = re.search(r"Fatal Python error: (.*)", text)
        return {"outcome": "crash", "detail": name + (f" ({fault.group(1)})" if fault else ""), "exception": None}
    chain = data.get("exception")
    if chain:
        outcome, detail = classify_exception(chain, text)
        return {"outcome": outcome, "detail": detail, "exception": chain[0]["type"]}
    if returncode == 0:
        bad = [line for line in text.splitlines() if MISMATCH_PATTERNS.search(line)]
        if bad:
            return {"outcome": "wrong result", "detail": f"printed: {first_line(bad[0])}", "exception": None}
        return {"outcome": "passed", "detail": "", "exception": None}
    # no report: the interpreter died before or after the program (e.g. at exit)
    fault = re.search(r"Fatal Python error: (.*)", text)
    return {"outcome": "crash" if fault else "other",
            "detail": fault.group(1) if fault else f"exit {returncode}: {first_line(text[-500:])}",
            "exception": None}


# --------------------------------------------------------------------------- report
def print_table(results, stream=sys.stdout):
    width = max([len("program")] + [len(r["program"]) for r in results])
    owidth = max(len(o) for o in OUTCOMES)
    print(f"{'program':<{width}}  {'outcome':<{owidth}}  detail", file=stream)
    for r in results:
        extra = ""
        if r["outcome"] == "needs a GPU":
            extra = f" [kernels lowered: {r['kernels_lowered']}, through NVRTC: {r['kernels_compiled']}]"
        detail = r["detail"] if len(r["detail"]) <= 160 else r["detail"][:157] + "..."
        print(f"{r['program']:<{width}}  {r['outcome']:<{owidth}}  {detail}{extra}", file=stream)
    counts = {o: sum(1 for r in results if r["outcome"] == o) for o in OUTCOMES}
    summary = ", ".join(f"{o}: {n}" for o, n in counts.items() if n)
    print(f"\n{len(results)} programs -- {summary}", file=stream)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cuda",
                        help="cuda, cpu, or a full target string (\"cuda -arch=sm_80\")")
    parser.add_argument("--only", action="append", default=[],
                        help="run programs whose repo/path contains PATTERN or matches it as a glob "
                        "(repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="programs run at once")
    parser.add_argument("--cpu-tensors", action="store_true",
                        help="make the programs' torch 'cuda' tensors on the CPU (with --target cpu: a program "
                        "written for a GPU runs unchanged on the CPU back end)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per program")
    parser.add_argument("--out", help="write one JSON line per program here")
    parser.add_argument("--logs", help="write each program's output to this folder")
    # The list is kept in the repository too (benchmarks/upstream_programs.manifest); the
    # files themselves are upstream's and live only in the ignored folder.
    parser.add_argument("--manifest", default=str(PROGRAMS / "MANIFEST.txt"))
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the programs")
    parser.add_argument("--summarize", metavar="JSONL",
                        help="only print the table of an earlier run's --out file (a run cut short too)")
    args = parser.parse_args(argv)
    if args.summarize:
        print_table([json.loads(line) for line in open(args.summarize) if line.strip()])
        return 0

    manifest = Path(args.manifest)
    if not manifest.exists():
        sys.exit(f"no manifest at {manifest}: the upstream programs are not here "
                 "(carry .upstream_programs along)")
    rows = select(read_manifest(manifest), args.only)
    if not rows:
        sys.exit("no program matches")
    missing = [r for r in rows if not (PROGRAMS / r["repo"] / r["path"]).exists()]
    if missing:
        sys.exit("listed but absent: " + ", ".join(f"{r['repo']}/{r['path']}" for r in missing))
    signal.signal(signal.SIGTERM, stop_running)
    signal.signal(signal.SIGINT, stop_running)
    tl_target = target_string(args.target, args.python)
    print(f"{len(rows)} programs, TILELANG_TARGET={tl_target!r}, {args.timeout:g} s each, "
          f"{args.jobs} at a time", file=sys.stderr)

    results = [None] * len(rows)
    out = open(args.out, "w") if args.out else None
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, row, args, tl_target): i for i, row in enumerate(rows)}
        for future in futures:
            i = futures[future]
            results[i] = future.result()
            r = results[i]
            print(f"[{i + 1}/{len(rows)}] {r['program']}: {r['outcome']} ({r['seconds']} s)",
                  file=sys.stderr)
            if out:
                out.write(json.dumps(r) + "\n")
                out.flush()
    if out:
        out.close()
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
