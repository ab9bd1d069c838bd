"""The invalid-program corpus (cases.txt) on every available target: each case must fail
with its exception at its line, or succeed where it is an odd but valid program; never an
internal error, a crash or a hang (each case runs in a worker process with a time limit,
runner.TIME_LIMIT_S, TILELANG_CORPUS_TIME_LIMIT to change it).

Targets: those of the suite (conftest.TARGETS or TILELANG_TEST_TARGETS) and, where NVRTC
is present, "cuda-compile": the CUDA path up to loading the cubin, on a machine without a
GPU (cases that call their kernel are not run there)."""
import atexit

import pytest

from conftest import selected_targets, target_unavailable_reason
from corpus.runner import Worker, applies, judge, load_cases

CASES = load_cases()
_workers = {}


def _nvrtc_reason():
    from tilelang import _C
    try:
        _C.nvrtc_id()
        return None
    except Exception as e:  # noqa: BLE001 - the library is missing or unusable
        return str(e).splitlines()[0]


def _corpus_targets():
    targets = list(selected_targets())
    if "cuda" not in targets or target_unavailable_reason("cuda"):
        targets.append("cuda-compile")
    return targets


def _unavailable(target):
    if target == "cuda-compile":
        return _nvrtc_reason()
    return target_unavailable_reason(target)


def _worker(target):
    if target not in _workers:
        _workers[target] = Worker(target)
        atexit.register(_workers[target].close)
    return _workers[target]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("corpus_target", _corpus_targets())
def test_invalid_program(corpus_target, case):
    reason = _unavailable(corpus_target)
    if reason:
        pytest.skip(f"target {corpus_target!r} not available: {reason}")
    why_not = applies(case, corpus_target)
    if why_not:
        pytest.skip(why_not)
    problem = judge(case, corpus_target, _worker(corpus_target).run(case))
    assert problem is None, f"{case.name} (corpus/cases.txt:{case.origin}) on {corpus_target}: {problem}"


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 150
    errors = [c for c in CASES if c.expect != "ok"]
    assert len(errors) >= 130 and all(c.line for c in errors)
