"""Whether upstream TileLang lowers the kernels this project benchmarks against it (the same DSL
source on both), for sm_90a, without a GPU: the attention sweep's kernel and the attention
examples' kernels at their benchmark configurations. Run it with upstream's package on the
path, in upstream's own Python (its native modules fix the version):

    PYTHONPATH=<upstream site> python benchmarks/upstream_lowers.py [--stub-torch]

--stub-torch: import upstream without torch (a stand-in module answers every torch name; the
kernels are only lowered, never run). One line a kernel: "lowers" or upstream's first error
line; exit status 1 when any kernel fails.
"""

import argparse
import importlib.abc
import importlib.machinery
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))


class _TorchStandIn(types.ModuleType):
    """Any attribute is another stand-in; class-like names (torch.Tensor, torch.dtype) are
    real classes, so that isinstance checks work."""

    _CLASSES = ("dtype", "device", "finfo", "iinfo", "layout", "memory_format")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {}) if name[:1].isupper() or name in self._CLASSES else _TorchStandIn(
            f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value

    def __call__(self, *args, **kwargs):
        return _TorchStandIn(self.__name__ + "()")

    def __iter__(self):
        return iter(())


class _TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _TorchStandIn(spec.name)
        module.__path__, module.__version__ = [], "2.5.0"
        return module

    def exec_module(self, module):
        pass


def kernels():
    """(name, prim_func) of the kernels the benchmarks run on both implementations."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "kernels"))
    sys.path.insert(0, os.path.join(HERE, "..", "examples", "attention"))
    from attention import flash_attention_fwd
    import flash_attn_bwd
    import flash_attn_fwd
    import mla_decode
    import sparse_mla
    import split_kv
    for causal in (False, True):
        for dim, (bm, bn, stages, threads) in ((128, (128, 128, 2, 256)), (64, (192, 128, 2, 384)),
                                               (256, (128, 64, 2, 256))):
            tag = f"d{dim}{' causal' if causal else ''} {bm}x{bn}"
            yield f"attention sweep {tag}", flash_attention_fwd(4, 16, 4096, dim, causal, block_M=bm, block_N=bn,
                                                                  num_stages=stages, threads=threads)
            yield f"flash_attn_fwd {tag}", flash_attn_fwd.flash_attn_fwd(4, 16, 4096, dim, is_causal=causal, block_M=bm,
                                                                         block_N=bn, num_stages=stages, threads=threads)
        yield f"flash_attn_bwd d128{' causal' if causal else ''} (atomic dQ)", flash_attn_bwd.attention_bwd(
            4, 16, 4096, 128, causal, block_M=64, block_N=128, num_stages=2, threads=256)
    for heads in (16, 128):
        yield f"mla_decode split, {heads} heads", mla_decode.mla_decode_split(
            64, heads, 4096, 64, 64, 132, 196, 576 ** -0.5, **mla_decode.tile_config("cuda", heads))
    yield "mla_decode combine", split_kv.combine_items(64, 16, 196, 512, pdl=True)
    yield "sparse_mla", sparse_mla.sparse_mla_fwd(1, 1024, 8192, 128, 2048, 576 ** -0.5,
                                                  **sparse_mla.tile_config("cuda"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stub-torch", action="store_true", help="import upstream without torch")
    args = ap.parse_args()
    if args.stub_torch:
        sys.meta_path.insert(0, _TorchFinder())
    import tilelang
    import tilelang.jit
    # The examples ask this project's target resolution for their tile sizes: CUDA here.
    backends = types.ModuleType("tilelang.jit.backends")
    backends.resolve_target = lambda target: "cuda -arch=sm_90a"
    sys.modules.setdefault("tilelang.jit.backends", backends)
    from tvm.target import Target
    failed = 0
    for name, func in kernels():
        target = Target({"kind": "cuda", "arch": "sm_90a"})
        try:
            with target:
                tilelang.lower(func, target=target)
            print(f"{name}: lowers")
        except Exception as e:  # upstream's error, reported per kernel
            failed += 1
            print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
