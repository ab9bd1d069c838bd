"""set_autotune_inputs: the inputs tuning runs every candidate on, given by the caller."""
from __future__ import annotations

import threading

_state = threading.local()


def get_autotune_inputs():
    """The inputs of the innermost active set_autotune_inputs block, or None."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


class set_autotune_inputs:  # noqa: N801 - upstream's name
    """with set_autotune_inputs(a, b): ... (or set_autotune_inputs([a, b])): candidates tuned
    inside the block are checked and timed on these inputs."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        self.inputs = list(args)

    def __enter__(self):
        if not hasattr(_state, "stack"):
            _state.stack = []
        _state.stack.append(self.inputs)
        return self

    def __exit__(self, *exc):
        _state.stack.pop()
        return False
