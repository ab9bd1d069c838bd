"""The kernel cache survives faults: a library cut short or altered, metadata that is
garbage or incomplete, files missing from an entry are noticed (each entry's metadata holds
the SHA-256 of its files) and the kernel is built again; processes that compile the same
kernel at once build it once (an flock per entry, files renamed into place) and all get a
correct kernel; a lock that a dead process held is free, one held too long is given up on.

Each compile runs in a fresh process (no memory cache, nothing loaded yet) on the CPU
target, against a cache directory of the test's own."""
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tilelang
    import tilelang.language as T

    SCALE = {scale}

    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * SCALE + 1.0

    def run():
        k = tilelang.compile(main, target="cpu")
        a = np.arange(256, dtype=np.float32)
        b = np.zeros_like(a)
        k(a, b)
        assert (b == a * SCALE + 1).all(), "wrong result"
        return {{"hit": k.cache_hit, "key": k.cache_key}}

    if __name__ == "__main__":
        print(json.dumps(run()))
''')


@pytest.fixture
def kernel_script(tmp_path):
    script = tmp_path / "cached_kernel.py"
    script.write_text(SCRIPT.format(scale=3.0))
    return script


def compile_in_a_new_process(script, cache_dir, **env):
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TILELANG_CACHE_DIR=str(cache_dir), TILELANG_DISABLE_CACHE="0", **env))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def entry_of(cache_dir, key):
    return cache_dir / key[:2] / key


def test_a_fresh_process_loads_the_kernel_without_building(kernel_script, tmp_path):
    first, _ = compile_in_a_new_process(kernel_script, tmp_path / "cache")
    second, _ = compile_in_a_new_process(kernel_script, tmp_path / "cache")
    assert first["hit"] is None and second["hit"] == "disk"
    meta = json.loads((entry_of(tmp_path / "cache", first["key"]) / "meta.json").read_text())
    assert set(meta["files"]) == {"kernel.so", "kernel.cpp", "report.txt"}


def _cut_short(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 3])


def _flip_bytes(path):
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("fault,file", [
    (_cut_short, "kernel.so"), (_flip_bytes, "kernel.so"), (os.unlink, "kernel.so"),
    (lambda p: p.write_text("{not json"), "meta.json"), (lambda p: p.write_text("[]"), "meta.json"),
    (lambda p: p.write_text('{"name": "main"}'), "meta.json"), (_cut_short, "meta.json"),
    (os.unlink, "report.txt"), (lambda p: p.write_text(""), "kernel.cpp")])
def test_a_damaged_entry_is_built_again(kernel_script, tmp_path, fault, file):
    cache = tmp_path / "cache"
    first, _ = compile_in_a_new_process(kernel_script, cache)
    fault(entry_of(cache, first["key"]) / file)
    again, _ = compile_in_a_new_process(kernel_script, cache)
    assert again["hit"] is None, "the damaged entry was used"
    last, _ = compile_in_a_new_process(kernel_script, cache)
    assert last["hit"] == "disk", "the rebuilt entry is not used"


def _compile_in_a_child(script, cache_dir, barrier):
    """A multiprocessing child: waits for the others, then compiles and runs the kernel."""
    os.environ["TILELANG_CACHE_DIR"] = str(cache_dir)
    os.environ["TILELANG_DISABLE_CACHE"] = "0"
    import runpy
    module = runpy.run_path(str(script))
    barrier.wait()
    return module["run"]()


def test_processes_compiling_one_kernel_at_once_build_it_once(kernel_script, tmp_path):
    n = 4
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(n)
        with ctx.Pool(n) as pool:
            results = pool.starmap(_compile_in_a_child, [(kernel_script, tmp_path / "cache", barrier)] * n)
    assert len({r["key"] for r in results}) == 1
    hits = sorted(str(r["hit"]) for r in results)
    assert hits == ["None"] + ["disk"] * (n - 1), hits  # one built it, the others waited and loaded it
    entry = entry_of(tmp_path / "cache", results[0]["key"])
    assert not list(entry.glob("*.tmp")), "temporary files left behind"


HOLD_LOCK = textwrap.dedent('''
    import sys, time
    from tilelang.jit import cache
    with cache.entry_lock(sys.argv[1]) as held:
        assert held
        print("locked", flush=True)
        time.sleep(600)
''')


def _hold_the_lock(tmp_path, key):
    script = tmp_path / "hold_lock.py"
    script.write_text(HOLD_LOCK)
    holder = subprocess.Popen([sys.executable, str(script), key], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "cache")))
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_lock_held_by_a_dead_process_is_free(kernel_script, tmp_path):
    first, _ = compile_in_a_new_process(kernel_script, tmp_path / "cache")
    holder = _hold_the_lock(tmp_path, first["key"])
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    start = time.monotonic()
    again, _ = compile_in_a_new_process(kernel_script, tmp_path / "cache")
    assert again["hit"] == "disk" and time.monotonic() - start < 60


def test_a_lock_held_too_long_is_given_up_on(kernel_script, tmp_path):
    first, _ = compile_in_a_new_process(kernel_script, tmp_path / "cache")
    holder = _hold_the_lock(tmp_path, first["key"])
    try:
        again, stderr = compile_in_a_new_process(kernel_script, tmp_path / "cache", TILELANG_CACHE_LOCK_TIMEOUT="1")
    finally:
        holder.kill()
        holder.wait()
    assert again["hit"] is None  # built in a directory of its own
    assert "stayed locked for over 1 s; building this kernel without the cache" in stderr
