#!/usr/bin/env bash
# One call on a GPU machine: build, run the C++ and Python suites on the GPU, run the
# benchmarks against references measured in the same run, print a short table last.
#   bash benchmarks/run_gpu.sh            (logs under $OUT when set, else build/gpu-logs)
#   bash benchmarks/run_gpu.sh webgpu     (build, then only the webgpu suite and its GEMM)
#   bash benchmarks/run_gpu.sh tests      (build and every suite, no benchmarks)
#   bash benchmarks/run_gpu.sh hopper [--quick]  (build, the GEMM suites on cuda, then the GEMM
#                                         sweep against cuBLAS / _scaled_mm and upstream TileLang;
#                                         SWEEP_ONLY=ours|upstream: that sweep only, none: the suites
#                                         only; HOPPER_SWITCHES=a,b: the suites again with those
#                                         switch pass configs forced)
#   bash benchmarks/run_gpu.sh pytest ARGS... (build, then pytest ARGS on cuda under the crash handler)
#   bash benchmarks/run_gpu.sh fuzz [SEEDS] (build, then the differential fuzzer on cuda over SEEDS,
#                                         default 0-39, FUZZ_CASES per template and seed (40), in
#                                         FUZZ_JOBS processes (cores - 2), FUZZ_SECONDS s in all (300);
#                                         one summary line per template, a replay line per failure)
#   bash benchmarks/run_gpu.sh autotune   (build, the 126-configuration GEMM tune twice: fresh, cached;
#                                         then fresh through a local Ray instance)
#   bash benchmarks/run_gpu.sh attention  (build, the torch / eager suites on cuda, the attention
#                                         examples (ATTENTION_TESTS=0: not these), MLA decode variants
#                                         (MLA_VARIANTS) and, with .upstream_programs and .ref carried,
#                                         upstream's MLA examples on both; then the FlashAttention forward
#                                         sweep against cuDNN and upstream TileLang and the backward sweep
#                                         against cuDNN / flash SDPA)
#   bash benchmarks/run_gpu.sh decode     (build, the MLA decode variants and upstream's MLA examples on
#                                         both implementations, MLA_ROUNDS times each, as in attention mode)
#   bash benchmarks/run_gpu.sh programs [--only PATTERN]  (build, then upstream TileLang's own
#                                         programs, unchanged, each in its own process on cuda:
#                                         benchmarks/upstream_programs.py over
#                                         .upstream_programs/MANIFEST.txt, which the device call
#                                         must carry; one JSON line a program in programs.jsonl,
#                                         the table in programs_table.txt, each program's output
#                                         in programs_logs.tgz. PROGRAMS_JOBS programs at a time
#                                         (default 4), PROGRAM_TIMEOUT s each (120), PROGRAMS_TIMEOUT
#                                         s in all (420); extra arguments go to the script; wheels
#                                         in .upstream_programs/wheels are installed first)
# The webgpu suite runs too when `import wgpu` works. On a machine without the Vulkan
# loader, unpack Debian's libvulkan1 (and friends) into / first and point the loader at
# the driver, e.g. VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json;
# wgpu, cffi, pycparser and rendercanvas can be installed from wheels with pip --target.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${OUT:-build/gpu-logs}
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tilelang-cache}

echo "== build"
tests=OFF
$PY - <<'PYEOF' 2>/dev/null && tests=ON
import ctypes.util, os, sys
sys.exit(0 if os.path.exists("/usr/include/gtest/gtest.h") else 1)
PYEOF
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$(command -v $PY)" \
  -DTILELANG_BUILD_TESTS=$tests > "$LOGS/cmake.log" 2>&1 || { tail -30 "$LOGS/cmake.log"; exit 1; }
cmake --build build/gpu -j"$(nproc)" > "$LOGS/build.log" 2>&1 || { grep -m20 error "$LOGS/build.log"; exit 1; }
cp build/gpu/_C*.so python/tilelang/
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
# A test process that dies inside native code leaves its native stack (and the test's name):
# printed, with the C++ core's frames resolved, when the script ends.
if gcc -shared -fPIC -O1 -o build/gpu/native_backtrace.so benchmarks/crash/native_backtrace.c 2>/dev/null; then
  export NATIVE_BACKTRACE_LIB=$PWD/build/gpu/native_backtrace.so NATIVE_BACKTRACE_LOG=/tmp/native_crash.log
  export PYTHONPATH=$PYTHONPATH:$PWD/benchmarks/crash PYTEST_ADDOPTS="-p pytest_native_backtrace ${PYTEST_ADDOPTS:-}"
  rm -f "$NATIVE_BACKTRACE_LOG"
  trap 'bash benchmarks/crash/symbolize.sh "$NATIVE_BACKTRACE_LOG" "$(ls build/gpu/_C*.so | head -1)"' EXIT
fi
# MLA decode variants (MLA_VARIANTS: JSON of named tile / pass-config variants, see
# benchmarks/mla_variants.py) in GB/s of cached rows beside the device copy bandwidth.
mla_variants() {
  echo "== decode: MLA variants (GB/s of cached rows, beside the device copy bandwidth)"
  # The default tiles (16 heads x 64 rows, 2 stages), the fused combine, and deeper pipelines
  # of 32-row tiles (4 or 5 stages; or 2 stages and two blocks an SM).
  MLA_VARIANTS=${MLA_VARIANTS:-'{"default": {}, "fused": {"fuse_combine": true}, "n32s4": {"block_N": 32, "num_stages": 4}, "n32s5": {"block_N": 32, "num_stages": 5}, "n32 2/SM": {"block_N": 32, "num_stages": 2, "num_blocks": 264}}'}
  timeout ${SWEEP_TIMEOUT:-900} $PY benchmarks/mla_variants.py --variants "$MLA_VARIANTS" --splits balanced 2>&1 \
    | grep -v -e Warning -e "return JITKernel" | tee "$LOGS/mla_variants.txt"
}
# Upstream's MLA decode examples, unchanged, run by ours and by upstream TileLang in turn
# (MLA_ROUNDS rounds, default 1), when .upstream_programs and .ref are carried.
upstream_mla_examples() {
  [ -f .ref/tl_site.tar.xz ] && [ -d .upstream_programs/tile-ai/tilelang/examples/deepseek_mla ] || return 0
  echo "== decode: upstream's MLA examples, the same source on both"
  mkdir -p /tmp/tlref && tar -C /tmp/tlref -xJf .ref/tl_site.tar.xz
  ls .upstream_programs/wheels/*.whl > /dev/null 2>&1 && $PY -m pip install --no-index --no-deps -q .upstream_programs/wheels/*.whl 2>/dev/null
  for run in "example_mla_decode.py --batch 128 --heads 16 --kv_ctx 4096" "example_mla_decode.py" \
             "example_mla_decode_paged.py --batch 128 --h_q 16 --cache_seqlen 4096" "example_mla_decode_paged.py --batch 64 --h_q 128 --cache_seqlen 4096"; do
    for round in $(seq ${MLA_ROUNDS:-1}); do
      for side in ours upstream; do
        path=$PWD/python; [ $side = upstream ] && path=/tmp/tlref
        echo "$side $run: $(cd .upstream_programs/tile-ai/tilelang/examples/deepseek_mla && PYTHONPATH=$path timeout 150 $PY $run 2>&1 \
          | grep -E 'Latency|TFlops|Tile-lang|Error' | tail -3 | tr '\n' ' ')"
      done
    done
  done
}
ONLY=${1:-all}
if [ "$ONLY" = pytest ]; then
  shift
  TILELANG_TEST_TARGETS=cuda timeout ${HOPPER_TEST_TIMEOUT:-600} $PY -m pytest -q -p no:cacheprovider "$@" \
    > "$LOGS/pytest_args.log" 2>&1; tail -3 "$LOGS/pytest_args.log"
  grep -E "^(FAILED|ERROR)|Fatal Python error" "$LOGS/pytest_args.log" | head -20
  exit 0
fi
if [ "$ONLY" = fuzz ]; then
  # The cases in parallel processes (compiling dominates), every template interleaved.
  jobs=${FUZZ_JOBS:-$(( $(nproc) > 4 ? $(nproc) - 2 : 2 ))}
  timeout ${HOPPER_TEST_TIMEOUT:-600} $PY tests/python/fuzz/runner.py --target cuda --seeds "${2:-0-39}" \
    --cases ${FUZZ_CASES:-40} --jobs "$jobs" --seconds ${FUZZ_SECONDS:-300} > "$LOGS/fuzz_cuda.log" 2>&1
  echo "fuzzer exit $?, $jobs processes"; grep -E "cases:" "$LOGS/fuzz_cuda.log"
  grep -E "^fuzz (mismatch|error):|Traceback|Error" "$LOGS/fuzz_cuda.log" | head -20
  exit 0
fi
if [ "$ONLY" = decode ]; then
  mla_variants
  upstream_mla_examples
  exit 0
fi
if [ "$ONLY" = attention ]; then
  # FlashAttention forward, ours against cuDNN SDPA and upstream TileLang (same DSL source,
  # same configurations), after the GPU tests of the torch integration and the eager style.
  if [ "${ATTENTION_TESTS:-1}" = 1 ]; then  # ATTENTION_TESTS=0: the sweeps only
  echo "== Python torch / eager / extern suites on cuda"
  TILELANG_TEST_TARGETS=cuda timeout ${HOPPER_TEST_TIMEOUT:-600} $PY -m pytest -q -p no:cacheprovider \
    tests/python/test_torch_op.py tests/python/test_layout_pictures.py tests/python/test_eager_jit.py \
    tests/python/test_engine_and_extern.py > "$LOGS/pytest_attention.log" 2>&1; tail -1 "$LOGS/pytest_attention.log"
  grep -E "^(FAILED|ERROR)" "$LOGS/pytest_attention.log" | head -20
  echo "== attention examples on cuda (tests, then each example's own check and timing)"
  TILELANG_TEST_TARGETS=cuda timeout ${HOPPER_TEST_TIMEOUT:-600} $PY -m pytest -q -p no:cacheprovider \
    tests/python/test_examples_attention_fwd.py tests/python/test_examples_attention_bwd.py \
    tests/python/test_examples_decode.py > "$LOGS/pytest_examples.log" 2>&1; tail -1 "$LOGS/pytest_examples.log"
  grep -E "^(FAILED|ERROR)" "$LOGS/pytest_examples.log" | head -20
  for example in examples/attention/*.py; do
    grep -q "__main__" "$example" || continue  # a module the examples share
    name=$(basename "$example" .py)
    timeout ${EXAMPLE_TIMEOUT:-120} $PY "$example" > "$LOGS/example_$name.log" 2>&1
    echo "$name (exit $?): $(tail -3 "$LOGS/example_$name.log" | tr '\n' ' ')"
  done
  fi
  mla_variants
  upstream_mla_examples
  echo "== attention sweep: ours"
  # ATTENTION_CONFIGS='[[bm,bn,stages,threads],...]': the forward sweep's configurations (both implementations)
  CFG_ARGS=(); [ -n "${ATTENTION_CONFIGS:-}" ] && CFG_ARGS=(--configs "$ATTENTION_CONFIGS")
  ATTENTION_SWEEP_DUMP=$LOGS/kernel.attention.ours.cu timeout ${SWEEP_TIMEOUT:-900} $PY benchmarks/attention_sweep.py \
    --label ours --refs "${CFG_ARGS[@]}" > "$LOGS/attention_ours.jsonl" 2> "$LOGS/attention_ours.err"; tail -2 "$LOGS/attention_ours.err"
  if [ -n "${ATTENTION_OURS_ALSO:-}" ]; then  # ours again with these pass configs (JSON), for comparison
    timeout ${SWEEP_TIMEOUT:-900} $PY benchmarks/attention_sweep.py --label ours_also --pass-configs "$ATTENTION_OURS_ALSO" "${CFG_ARGS[@]}" \
      > "$LOGS/attention_ours_also.jsonl" 2> "$LOGS/attention_ours_also.err"; tail -2 "$LOGS/attention_ours_also.err"
    $PY benchmarks/hopper_table.py "$LOGS/attention_ours_also.jsonl" /dev/null | tee "$LOGS/attention_table_also.txt"
  fi
  if [ -f .ref/tl_site.tar.xz ]; then
    echo "== attention sweep: upstream TileLang"
    mkdir -p /tmp/tlref && tar -C /tmp/tlref -xJf .ref/tl_site.tar.xz
    (cd /tmp && PYTHONPATH=/tmp/tlref ATTENTION_SWEEP_DUMP=$LOGS/kernel.attention.upstream.cu timeout ${SWEEP_TIMEOUT:-900} \
      $PY "$OLDPWD/benchmarks/attention_sweep.py" --label upstream "${CFG_ARGS[@]}") > "$LOGS/attention_upstream.jsonl" 2> "$LOGS/attention_upstream.err"
    tail -2 "$LOGS/attention_upstream.err"
  fi
  echo "== attention backward sweep: ours against cuDNN / flash SDPA"
  ATTENTION_BWD_DUMP=$LOGS/kernel.bwd timeout ${SWEEP_TIMEOUT:-900} $PY benchmarks/attention_bwd_sweep.py --label ours --refs \
    > "$LOGS/attention_bwd.jsonl" 2> "$LOGS/attention_bwd.err"; tail -2 "$LOGS/attention_bwd.err"
  if [ -n "${ATTENTION_OURS_ALSO:-}" ]; then  # the backward's main kernel with those pass configs too
    timeout ${SWEEP_TIMEOUT:-900} $PY benchmarks/attention_bwd_sweep.py --label ours_also --pass-configs "$ATTENTION_OURS_ALSO" \
      > "$LOGS/attention_bwd_also.jsonl" 2> "$LOGS/attention_bwd_also.err"; tail -2 "$LOGS/attention_bwd_also.err"
    $PY benchmarks/hopper_table.py "$LOGS/attention_bwd_also.jsonl" /dev/null | tee "$LOGS/attention_table_bwd_also.txt"
  fi
  $PY benchmarks/hopper_table.py "$LOGS/attention_bwd.jsonl" | tee "$LOGS/attention_table_bwd.txt"
  $PY benchmarks/hopper_table.py "$LOGS/attention_ours.jsonl" "$LOGS/attention_upstream.jsonl" | tee "$LOGS/attention_table.txt"
  (cd "$LOGS" && tar -czf attention_logs.tgz --remove-files $(ls | grep -v -e '^attention_table.*txt$' -e '\.tgz$'))
  exit 0
fi
if [ "$ONLY" = autotune ]; then
  # The 126-configuration GEMM tune twice (the second run from the cache), then the CPU target.
  export TILELANG_CACHE_DIR=/tmp/tilelang-cache-autotune
  rm -rf "$TILELANG_CACHE_DIR"
  for run in first second; do
    timeout ${SWEEP_TIMEOUT:-300} $PY benchmarks/autotune_bench.py --target cuda 2>> "$LOGS/autotune.err" | tee -a "$LOGS/autotune.jsonl"
  done
  # The same space through Ray (a local instance: CPU workers compile, one worker per GPU
  # times) from an empty cache: the same configuration should win.
  if $PY -c "import ray" 2>/dev/null; then
    TILELANG_CACHE_DIR=/tmp/tilelang-cache-autotune-ray timeout ${SWEEP_TIMEOUT:-300} $PY benchmarks/autotune_bench.py \
      --target cuda --executor ray 2>> "$LOGS/autotune.err" | tee -a "$LOGS/autotune.jsonl"
  fi
  tail -5 "$LOGS/autotune.err"
  exit 0
fi
if [ "$ONLY" = hopper ]; then
  suites=yes; [ -n "${SWEEP_ONLY:-}" ] && [ "$SWEEP_ONLY" != none ] && suites=no
  [ $suites = no ] || echo "== Python GEMM suites on cuda"
  [ $suites = no ] || TILELANG_TEST_TARGETS=cuda timeout ${HOPPER_TEST_TIMEOUT:-900} $PY -m pytest -q -p no:cacheprovider tests/python/test_hopper.py \
    tests/python/test_persistent.py tests/python/test_ws_regions.py tests/python/test_clusters.py tests/python/test_kernels.py tests/python/test_tensor_map.py tests/python/test_reliability.py > "$LOGS/pytest_hopper.log" 2>&1; tail -3 "$LOGS/pytest_hopper.log"
  grep -E "^(FAILED|ERROR)" "$LOGS/pytest_hopper.log" | head -30
  if [ -n "${HOPPER_SWITCHES:-}" ] && [ $suites = yes ]; then
    # The same suites with switch pass configs forced on every compiled kernel (e.g.
    # tl.disable_tma_lower,tl.disable_warp_specialized): the paths without TMA / WS.
    echo "== Python GEMM suites on cuda with $HOPPER_SWITCHES"
    TILELANG_TEST_SWITCHES=$HOPPER_SWITCHES TILELANG_CACHE_DIR=/tmp/tilelang-cache-switches TILELANG_TEST_TARGETS=cuda \
      timeout ${HOPPER_TEST_TIMEOUT:-900} $PY -m pytest -q -p no:cacheprovider tests/python/test_hopper.py \
      tests/python/test_persistent.py tests/python/test_kernels.py tests/python/test_reliability.py \
      > "$LOGS/pytest_hopper_switches.log" 2>&1; tail -3 "$LOGS/pytest_hopper_switches.log"
    grep -E "^(FAILED|ERROR)" "$LOGS/pytest_hopper_switches.log" | head -30
  fi
  if [ "${SWEEP_ONLY:-}" = none ]; then  # the suites only
    (cd "$LOGS" && tar -czf logs.tgz --remove-files $(ls | grep -v -e '^logs.tgz$'))
    exit 0
  fi
  echo "== GEMM sweep: ours"
  export GEMM_SWEEP_DUMP=$LOGS/kernel
  [ "${SWEEP_ONLY:-}" = upstream ] || timeout ${SWEEP_TIMEOUT:-1800} $PY benchmarks/gemm_sweep.py --label ours --refs ${2:-} > "$LOGS/sweep_ours.jsonl" 2> "$LOGS/sweep_ours.err"
  tail -2 "$LOGS/sweep_ours.err"
  if [ -f .ref/tl_site.tar.xz ] && [ "${SWEEP_ONLY:-}" != ours ]; then
    echo "== GEMM sweep: upstream TileLang (same DSL source, same configurations)"
    mkdir -p /tmp/tlref && tar -C /tmp/tlref -xJf .ref/tl_site.tar.xz
    (cd /tmp && PYTHONPATH=/tmp/tlref timeout ${SWEEP_TIMEOUT:-1800} $PY "$OLDPWD/benchmarks/gemm_sweep.py" --label upstream \
      --dtypes ${UPSTREAM_DTYPES:-bfloat16,float16,float8_e4m3} ${2:-}) \
      > "$LOGS/sweep_upstream.jsonl" 2> "$LOGS/sweep_upstream.err"
    tail -2 "$LOGS/sweep_upstream.err"
  fi
  $PY benchmarks/hopper_table.py "$LOGS/sweep_ours.jsonl" "$LOGS/sweep_upstream.jsonl" | tee "$LOGS/hopper_table.txt"
  # Every configuration's figure, the logs and the kernels' sources in one archive (a
  # device call brings back few files).
  (cd "$LOGS" && tar -czf logs.tgz --remove-files $(ls | grep -v -e '^hopper_table.txt$' -e '^logs.tgz$'))
  exit 0
fi
if [ "$ONLY" = programs ]; then
  # Upstream's programs as they are: what passes, and where each of the others stops (a missing
  # name, a compile error, a wrong result). The table is rebuilt from the JSON lines, so a run
  # cut short by the overall limit still reports the programs it finished.
  shift
  # Pure-Python packages some programs import (einops), carried as wheels beside them: the
  # GPU machine reaches no package index.
  if ls .upstream_programs/wheels/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --target /tmp/programs_site .upstream_programs/wheels/*.whl \
      && export PYTHONPATH=$PYTHONPATH:/tmp/programs_site
  fi
  echo "== upstream programs on cuda"
  timeout ${PROGRAMS_TIMEOUT:-420} $PY benchmarks/upstream_programs.py --target cuda --jobs ${PROGRAMS_JOBS:-4} \
    --timeout ${PROGRAM_TIMEOUT:-120} --out "$LOGS/programs.jsonl" --logs "$LOGS/programs_logs" "$@" \
    > "$LOGS/programs_run.txt" 2> "$LOGS/programs_progress.txt"
  [ $? -eq 124 ] && echo "(stopped at the overall limit of ${PROGRAMS_TIMEOUT:-420} s)"
  tail -3 "$LOGS/programs_progress.txt"
  [ -s "$LOGS/programs.jsonl" ] && $PY benchmarks/upstream_programs.py --summarize "$LOGS/programs.jsonl" \
    | tee "$LOGS/programs_table.txt" | tail -60
  [ -d "$LOGS/programs_logs" ] && (cd "$LOGS" && tar -czf programs_logs.tgz --remove-files programs_logs)
  exit 0
fi
if [ "$tests" = ON ] && [ "$ONLY" != webgpu ]; then
  echo "== C++ tests"
  ctest --test-dir build/gpu --output-on-failure > "$LOGS/ctest.log" 2>&1; tail -3 "$LOGS/ctest.log"
else
  echo "== C++ tests: skipped (no GoogleTest on this machine)"
fi
if [ "$ONLY" != webgpu ]; then
echo "== Python suite on cuda"
TILELANG_RANDOM_CASES=${TILELANG_RANDOM_CASES:-16} TILELANG_TEST_TARGETS=cuda timeout 900 $PY -m pytest -q -p no:cacheprovider tests/python \
  > "$LOGS/pytest_cuda.log" 2>&1; tail -3 "$LOGS/pytest_cuda.log"
grep -E "^(FAILED|ERROR)" "$LOGS/pytest_cuda.log" | head -40
fi
if $PY -c "import wgpu" 2>/dev/null; then
  echo "== Python suite on webgpu (this machine's Vulkan driver)"
  TILELANG_TEST_TARGETS=webgpu timeout 600 $PY -X faulthandler -m pytest -q -p no:cacheprovider -rs tests/python \
    > "$LOGS/pytest_webgpu.log" 2>&1
  rc=$?; grep -E "passed|failed" "$LOGS/pytest_webgpu.log" | tail -1
  grep -E "^(FAILED|ERROR)" "$LOGS/pytest_webgpu.log" | head -20
  if [ $rc -gt 128 ] || grep -q "Fatal Python error" "$LOGS/pytest_webgpu.log"; then
    # The process died (a signal): show where, natively when a debugger is at hand.
    grep -A12 "Fatal Python error" "$LOGS/pytest_webgpu.log" | head -24
    dbg=$(command -v gdb || command -v cuda-gdb)
    if [ -n "$dbg" ]; then
      echo "== webgpu suite again under $(basename "$dbg") (native backtrace)"
      TILELANG_TEST_TARGETS=webgpu timeout 600 "$dbg" -batch -ex "set pagination off" -ex run -ex bt \
        -ex "info registers rip" --args $PY -m pytest -q -x -p no:cacheprovider tests/python \
        > "$LOGS/gdb_webgpu.log" 2>&1
      grep -E "^#[0-9]+ " "$LOGS/gdb_webgpu.log" | head -30
    fi
  fi
  [ "$ONLY" = tests ] || $PY benchmarks/webgpu_bench.py 2>&1 | grep -v XDG_RUNTIME | tail -5
else
  echo "== Python suite on webgpu: skipped (wgpu is not installed here)"
fi
[ "$ONLY" = all ] || exit 0
echo "== example (make run's kernel, target auto)"
$PY examples/gemm.py --m 2048 --n 2048 --k 2048 2>&1 | tail -5
echo "== benchmarks"
$PY benchmarks/gpu_bench.py 2>&1 | tee "$LOGS/bench.log" | tail -40
