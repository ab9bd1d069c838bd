"""T.If / T.Then / T.Else: TVM script's branch frames, which some upstream programs use
instead of a Python `if` on a kernel value:

    with T.If(i < n), T.Then():          with T.If(i < n):
        C[i] = A[i]                          with T.Then():
                                                 C[i] = A[i]
                                             with T.Else():
                                                 C[i] = 0

The parser turns them into the same branch as `if i < n: ... else: ...`."""
from __future__ import annotations


class IfFrame:
    def __init__(self, cond):
        self.cond = cond


class ThenFrame:
    pass


class ElseFrame:
    pass


def If(cond):  # noqa: N802 - the DSL's name
    """The condition of a `with T.If(cond):` branch (its bodies are T.Then / T.Else)."""
    return IfFrame(cond)


def Then():  # noqa: N802
    """The branch taken when the enclosing T.If's condition holds."""
    return ThenFrame()


def Else():  # noqa: N802
    """The branch taken when the enclosing T.If's condition does not hold."""
    return ElseFrame()
