"""Target selection."""
from __future__ import annotations


def determine_target(target="auto", return_object: bool = False) -> str:
    """The target a kernel compiles for: "auto" is the CUDA device when one is usable (with
    its architecture, "cuda -arch=sm_90a"), else the CPU; another target is checked and
    returned in its canonical spelling. Targets are strings here, so return_object changes
    nothing."""
    from ..jit.backends import resolve_target
    return resolve_target(target)
