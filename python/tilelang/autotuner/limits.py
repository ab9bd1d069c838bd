"""The static filter: configurations over a limit of the target are rejected with the
reason before anything is compiled."""
from __future__ import annotations

import re

from .. import _C

# Shared memory a block may use (static + dynamic, bytes, with the opt-in) by compute
# capability, and threads per block.
_SMEM_PER_BLOCK = {
    70: 96 * 1024, 72: 48 * 1024, 75: 64 * 1024,
    80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
    90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024, 120: 99 * 1024, 121: 99 * 1024,
}
MAX_THREADS_PER_BLOCK = 1024


def cuda_arch(target: str) -> int | None:
    """The compute capability of a "cuda -arch=sm_XY[a]" target, as XY."""
    if "-arch=sm_" not in target:
        return None
    digits = "".join(ch for ch in target.split("-arch=sm_")[1].split()[0] if ch.isdigit())
    return int(digits) if digits else None


def shared_memory_limit(target: str) -> int | None:
    arch = cuda_arch(target)
    if arch is None:
        return None
    if arch in _SMEM_PER_BLOCK:
        return _SMEM_PER_BLOCK[arch]
    known = [a for a in _SMEM_PER_BLOCK if a <= arch]
    return _SMEM_PER_BLOCK[max(known)] if known else 48 * 1024


def check_static_limits(func, target: str, pass_configs=None) -> str | None:
    """Why func cannot run on target as a candidate (shared memory, threads per block, or
    per-thread arrays over the registers a thread has: such a kernel spills to local memory,
    slower than a configuration that fits), or None. Lowers the kernel (milliseconds) but
    compiles nothing; targets without such limits (the CPU) pass."""
    if not target.startswith("cuda"):
        return None
    from ..jit.backends import switches
    from ..errors import TileLangUnsupportedError
    try:
        lowered = _C.lower(func.handle, target, switches(pass_configs))
    except TileLangUnsupportedError as e:  # over a budget the lowering checks (check_block_budget)
        return e.message.splitlines()[0]
    spill = re.search(r"each thread holds (\d+) bytes of arrays \[slower path: more than the (\d+) registers "
                      r"\((\d+) bytes\)", lowered.lowering_report())
    if spill:
        return (f"each thread would hold {spill.group(1)} bytes of arrays, over the {spill.group(2)} registers "
                f"({spill.group(3)} bytes) a thread has: it would spill to local memory")
    limit = shared_memory_limit(target)
    for info in _C.cuda_kernel_infos(lowered):
        threads = 1
        for b in info["block"]:
            threads *= int(b)
        if threads > MAX_THREADS_PER_BLOCK:
            return (f"kernel {info['name']} needs {threads} threads per block, over the limit of "
                    f"{MAX_THREADS_PER_BLOCK}")
        smem = int(info["dynamic_shared_bytes"]) + int(info["static_shared_bytes"])
        if limit is not None and smem > limit:
            return (f"kernel {info['name']} needs {smem} bytes of shared memory "
                    f"({info['dynamic_shared_bytes']} dynamic + {info['static_shared_bytes']} static), over the "
                    f"{limit} bytes a block may use on sm_{cuda_arch(target)}")
    return None
