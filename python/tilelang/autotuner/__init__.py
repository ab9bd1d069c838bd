"""The autotuner (upstream TileLang's API): @tilelang.autotune over @tilelang.jit, or
AutoTuner.from_kernel(kernel=, configs=).set_compile_args(...).set_profile_args(...).run()."""
from .capture import get_autotune_inputs, set_autotune_inputs
from .limits import check_static_limits
from .param import AutotuneResult, CandidateRecord, CompileArgs, ProfileArgs
from .tuner import AutoTuneImpl, AutoTuner, autotune, get_available_cpu_count

__all__ = ["autotune", "AutoTuner", "AutoTuneImpl", "AutotuneResult", "CandidateRecord", "CompileArgs",
           "ProfileArgs", "set_autotune_inputs", "get_autotune_inputs", "check_static_limits",
           "get_available_cpu_count"]
