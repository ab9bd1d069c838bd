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


class AttrFrame:
    """What `with T.attr(node, key, value):` opens."""

    def __init__(self, node, key, value):
        self.node, self.key, self.value = node, key, value


# The attribute keys a kernel may open a scope with, and what each means.
ATTR_KEYS = {
    "async_scope": "the global -> shared copies inside are issued as cp.async (awaited by hand, e.g. by "
                   "T.cp_async_barrier_noinc and T.barrier_wait)",
    "reduce_scope": "T.tvm_thread_allreduce inside combines with the T.comm_reducer given as the node",
}


def attr(node, attr_key, value):
    """`with T.attr(node, attr_key, value):` -- TVM script's attribute scope. One key has a
    meaning here: "async_scope" (value 1), under which each element copy from a global
    tensor into a shared tile (a T.vectorized loop of 4, 8 or 16 bytes, or one such element)
    is issued as cp.async; the copying threads then arrive on an mbarrier when their copies
    land with T.cp_async_barrier_noinc. `node` is not used (upstream passes "default")."""
    return AttrFrame(node, attr_key, value)
