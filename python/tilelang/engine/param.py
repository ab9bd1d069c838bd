"""A kernel's parameters as programs read them (kernel.params), and what lower() returns."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Param as KernelParam  # noqa: F401 - name, kind, dtype, shape; is_scalar(), torch_dtype()


@dataclass
class CompiledArtifact:
    """The result of tilelang.engine.lower: the lowered device IR (printable with
    .script()), the parameters, and the generated source. host_mod and rt_mod stay None:
    this compiler has no separate host module, and tilelang.compile builds the runnable
    kernel."""

    host_mod: object
    device_mod: object
    params: list
    kernel_source: str
    rt_mod: object = None
    lowering_report: str = field(default="", repr=False)
