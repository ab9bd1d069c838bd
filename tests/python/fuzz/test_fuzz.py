"""The differential fuzzer in the test suite: for each template and target, cases 0, 1, ...
of the fixed seed until the case count or the time budget per template is reached (at
least three cases each), every result compared with numpy. A mismatch or an error fails
the test with one line per case that replays it.

    TILELANG_FUZZ_SEEDS    seeds to run, e.g. "0" (default), "0-9" or "3,7"
    TILELANG_FUZZ_CASES    cases per template and seed (default 40)
    TILELANG_FUZZ_SECONDS  time budget per template and target (default 7; 0: no limit)
    TILELANG_TEST_TARGETS  the targets, as for the whole suite (e.g. "cuda" on a GPU)

Cases that the target refuses with a typed "not supported" error (e.g. over an adapter's
limits) are counted, not failed; they must stay a minority of the cases run."""
import os

import pytest

from fuzz.runner import ERROR, MISMATCH, OK, UNSUPPORTED, _ints, run_cases, summary
from fuzz.templates import TEMPLATES

SEEDS = _ints(os.environ.get("TILELANG_FUZZ_SEEDS", "0"))
CASES = int(os.environ.get("TILELANG_FUZZ_CASES", "40"))
SECONDS = float(os.environ.get("TILELANG_FUZZ_SECONDS", "7")) or None


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_fuzz(target, name, capsys):
    kinds = getattr(TEMPLATES[name], "targets", None)
    if kinds and target.split()[0] not in kinds:
        pytest.skip(f"template {name} runs on {', '.join(kinds)}: the {target} target has no thread index to branch on")
    outcomes = run_cases([name], SEEDS, CASES, target, SECONDS, at_least=3)
    with capsys.disabled():
        print(f"\n[{target}] {summary(outcomes)}")
    failures = [o.line() for o in outcomes if o.status in (MISMATCH, ERROR)]
    assert not failures, f"{len(failures)} of {len(outcomes)} cases failed:\n" + "\n".join(failures)
    refused = sum(o.status == UNSUPPORTED for o in outcomes)
    assert sum(o.status == OK for o in outcomes) > refused, (
        f"most cases were refused by the target: " + "; ".join(o.line() for o in outcomes if o.status == UNSUPPORTED))
