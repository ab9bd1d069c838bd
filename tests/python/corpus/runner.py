"""The invalid-program corpus: cases.txt, and the runner that checks each case's outcome
in a worker process with a time limit (so that a crash or a hang is an outcome of that
case, not the end of the run).

A case of cases.txt:

    === name
    expect: TileLangShapeError        the exception (a class of its MRO), or "ok"
    expect@webgpu: ok                 the same for one target (optional)
    match: a fragment of the message  (optional)
    stage: call                       needs a device to run (not on cuda-compile)
    targets: cpu webgpu               only these targets (default: all)
    ---
    source, in which the line the error must name ends with  # <-- error

The line may be given as "line: N" instead. Outcomes: "ok" (as expected), or what went
wrong: "internal" (a TileLangInternalError), "crash" (the worker died), "hang" (over the
time limit), "no error", "wrong error", "wrong line", "no line", "wrong message".
"""
from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_FILE = os.path.join(HERE, "cases.txt")
MARKER = "# <-- error"
TIME_LIMIT_S = float(os.environ.get("TILELANG_CORPUS_TIME_LIMIT", "60"))


@dataclass
class Case:
    name: str
    source: str
    expect: str
    expect_for: dict = field(default_factory=dict)
    match: str = ""
    stage: str = "compile"
    targets: list = field(default_factory=list)
    line: int | None = None
    origin: int = 0  # line of the case's header in cases.txt

    def expected(self, target: str) -> str:
        return self.expect_for.get(target_kind(target), self.expect)


def load_cases(path=CASES_FILE):
    text = open(path, encoding="utf-8").read()
    cases, names = [], set()
    for m in re.finditer(r"^=== (\S+)\n(.*?)^---\n(.*?)(?=^=== |\Z)", text, re.S | re.M):
        name, header, source = m.group(1), m.group(2), m.group(3)
        if name in names:
            raise ValueError(f"{path}: case {name!r} twice")
        names.add(name)
        case = Case(name, source.rstrip() + "\n", "", origin=text.count("\n", 0, m.start()) + 1)
        for row in header.strip().splitlines():
            if row.startswith("#"):  # a comment on the case
                continue
            key, _, value = row.partition(":")
            key, value = key.strip(), value.strip()
            if key == "expect":
                case.expect = value
            elif key.startswith("expect@"):
                case.expect_for[key[len("expect@"):]] = value
            elif key == "match":
                case.match = value
            elif key == "stage":
                case.stage = value
            elif key == "targets":
                case.targets = value.split()
            elif key == "line":
                case.line = int(value)
            else:
                raise ValueError(f"{path}:{case.origin}: unknown field {key!r} in case {name!r}")
        marked = [i for i, t in enumerate(case.source.splitlines(), start=1) if t.rstrip().endswith(MARKER)]
        if len(marked) > 1:
            raise ValueError(f"{path}:{case.origin}: case {name!r} marks {len(marked)} lines")
        if marked:
            case.line = marked[0]
        if not case.expect:
            raise ValueError(f"{path}:{case.origin}: case {name!r} has no 'expect'")
        if case.expect != "ok" and case.line is None and any(e != "ok" for e in [case.expect]):
            raise ValueError(f"{path}:{case.origin}: case {name!r} expects an error but marks no line")
        cases.append(case)
    return cases


class Worker:
    """A worker process for one target; restarted after a crash or a hang."""

    def __init__(self, target: str):
        self.target = target
        self.proc = None

    def _start(self):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "worker.py"), self.target],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, cwd=os.path.dirname(HERE))

    def run(self, case: Case, limit: float = TIME_LIMIT_S) -> dict:
        """The worker's reply, or {"crash": exit status} / {"hang": seconds}."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"name": case.name, "source": case.source, "stage": case.stage}) + "\n")
        self.proc.stdin.flush()
        start = time.monotonic()
        ready, _, _ = select.select([self.proc.stdout], [], [], limit)
        if not ready:
            self.close()
            return {"hang": round(time.monotonic() - start, 1)}
        line = self.proc.stdout.readline()
        if not line:
            status = self.proc.wait()
            self.proc = None
            return {"crash": status}
        return json.loads(line)

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def judge(case: Case, target: str, reply: dict) -> str | None:
    """None when the outcome is what the case expects, else what went wrong."""
    if "hang" in reply:
        return f"hang: no outcome after {reply['hang']} s"
    if "crash" in reply:
        return f"crash: the worker died (exit status {reply['crash']})"
    raised, expect = reply["raised"], case.expected(target)
    first = (reply["message"] or "").splitlines()[0:3]
    if "TileLangInternalError" in raised:
        return f"internal: {' / '.join(first)}"
    if expect == "ok":
        return None if not raised else f"wrong error: expected none, got {raised[0]}: {' / '.join(first)}"
    if not raised:
        return f"no error: expected {expect}"
    if expect not in raised:
        return f"wrong error: expected {expect}, got {raised[0]}: {' / '.join(first)}"
    if reply["line"] is None:
        return f"no line: {raised[0]} names no line: {' / '.join(first)}"
    if os.path.basename(reply["file"] or "") != f"{case.name}.py" or reply["line"] != case.line:
        return (f"wrong line: expected line {case.line} of the case, got {reply['file']}:{reply['line']}: "
                f"{' / '.join(first)}")
    if case.match and case.match.lower() not in reply["message"].lower():
        return f"wrong message: {case.match!r} not in {reply['message'][:300]!r}"
    return None


def target_kind(target: str) -> str:
    """cpu, cuda (also "cuda-compile") or webgpu."""
    return "cuda" if target.startswith("cuda") else target.split()[0]


def applies(case: Case, target: str) -> str | None:
    """None when the case runs on target, else why not."""
    kind = target_kind(target)
    if case.targets and kind not in case.targets and target not in case.targets:
        return f"the case is for {', '.join(case.targets)}"
    if case.stage == "call" and target == "cuda-compile":
        return "a call needs a device (cuda-compile compiles only)"
    return None


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="run the invalid-program corpus on one target")
    ap.add_argument("--target", default="cpu", help="cpu, webgpu, cuda-compile or cuda")
    ap.add_argument("--case", action="append", help="only these cases")
    a = ap.parse_args(argv)
    cases = [c for c in load_cases() if not a.case or c.name in a.case]
    worker, bad, ran = Worker(a.target), 0, 0
    for case in cases:
        if applies(case, a.target):
            continue
        ran += 1
        problem = judge(case, a.target, worker.run(case))
        if problem:
            bad += 1
            print(f"{case.name} (cases.txt:{case.origin}): {problem}", flush=True)
    worker.close()
    print(f"{ran} cases on {a.target}: {ran - bad} as expected, {bad} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
