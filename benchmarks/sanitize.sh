#!/usr/bin/env bash
# compute-sanitizer over a chosen set of the CUDA tests, on a GPU machine: memcheck (bad
# global/shared accesses, leaks of device memory), racecheck (shared-memory hazards between
# threads of a block), synccheck (barriers not reached by every thread, bad mbarrier use).
# Prints a few lines per tool: the sanitizer's error count, pytest's result, and each
# distinct report with how often it came and the kernel it came from; logs under $OUT
# when set, else build/sanitize-logs.
#
#   bash benchmarks/sanitize.sh                      memcheck, racecheck and synccheck
#   bash benchmarks/sanitize.sh memcheck             one tool (or several, space separated)
#   SANITIZE_TESTS="tests/python/test_kernels.py -k gemm" bash benchmarks/sanitize.sh
#
# SANITIZE_TESTS: the pytest arguments (default below: the canonical kernels, the
# reliability cases, the random GEMMs/reductions and a few fuzzer cases per template);
# SANITIZE_TIMEOUT: seconds per tool (default 1200); SANITIZE_LEAKS=1: memcheck also reports
# device memory not freed at exit. Kernels run 10-100 times slower under
# a sanitizer, so the random and fuzz suites run few cases here. Builds like run_gpu.sh
# when the extension is not built yet. Needs a runtime where compute-sanitizer is allowed
# to attach to the GPU: the script checks that first and says so when it is not.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LOGS=${OUT:-build/sanitize-logs}
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TILELANG_CACHE_DIR=${TILELANG_CACHE_DIR:-/tmp/tilelang-cache}
export TILELANG_TEST_TARGETS=cuda TILELANG_RANDOM_CASES=${TILELANG_RANDOM_CASES:-3}
export TILELANG_FUZZ_CASES=${TILELANG_FUZZ_CASES:-4} TILELANG_FUZZ_SECONDS=${TILELANG_FUZZ_SECONDS:-0}
TOOLS=${*:-memcheck racecheck synccheck}
DEFAULT_TESTS="tests/python/test_kernels.py tests/python/test_reliability.py tests/python/test_random.py"
TESTS=${SANITIZE_TESTS:-$DEFAULT_TESTS tests/python/fuzz}

SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -z "$SAN" ]; then
  echo "sanitize: compute-sanitizer is not on this machine (install the CUDA toolkit's sanitizer)"
  exit 1
fi

if ! ls python/tilelang/_C*.so >/dev/null 2>&1; then
  echo "== build"
  cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$(command -v $PY)" \
    -DTILELANG_BUILD_TESTS=OFF > "$LOGS/cmake.log" 2>&1 || { tail -30 "$LOGS/cmake.log"; exit 1; }
  cmake --build build/gpu -j"$(nproc)" > "$LOGS/build.log" 2>&1 || { grep -m20 error "$LOGS/build.log"; exit 1; }
  cp build/gpu/_C*.so python/tilelang/
fi
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}

# Can the sanitizer attach here? (Some sandboxed runtimes refuse: "Device not supported".)
cat > "$LOGS/probe.py" <<'PYEOF'
import numpy as np, tilelang, tilelang.language as T
@T.prim_func
def probe(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] + 1.0
k = tilelang.compile(probe, out_idx=[1], target="cuda")
assert (np.asarray(k(np.zeros(256, np.float32))) == 1).all()
print("probe ok")
PYEOF
"$SAN" --tool memcheck --error-exitcode 86 $PY "$LOGS/probe.py" > "$LOGS/probe.log" 2>&1
rc=$?
if ! grep -q "probe ok" "$LOGS/probe.log"; then
  echo "sanitize: compute-sanitizer could not run a kernel on this machine (exit $rc):"
  grep -v "^$" "$LOGS/probe.log" | head -8
  exit 1
fi

status=0
for tool in $TOOLS; do
  echo "== compute-sanitizer --tool $tool: $TESTS"
  log="$LOGS/sanitize_$tool.log"
  extra=""
  [ "$tool" = racecheck ] && extra="--racecheck-report hazard"
  [ "$tool" = memcheck ] && [ -n "${SANITIZE_LEAKS:-}" ] && extra="--leak-check full"
  start=$(date +%s)
  timeout "${SANITIZE_TIMEOUT:-1200}" "$SAN" --tool "$tool" $extra --target-processes all \
    --print-limit 50 --log-file "$LOGS/sanitize_$tool.%p.san" \
    $PY -m pytest -q -p no:cacheprovider $TESTS > "$log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && echo "   stopped after ${SANITIZE_TIMEOUT:-1200} s (the counts below are for what ran)"
  echo "   pytest: $(grep -E '(passed|failed|error)' "$log" | tail -1) in $(( $(date +%s) - start )) s"
  # The sanitizer's summary per process, added up, then each distinct report with its count.
  reports=$(cat "$LOGS"/sanitize_"$tool".*.san 2>/dev/null)
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+" <<< "$reports" | awk '{s += $3} END {print s + 0}')
  echo "   $tool: $errors error(s) reported"
  if [ "$errors" -gt 0 ]; then
    status=1
    # Each kind of report once, with its count (addresses blanked), then the kernels named.
    kinds='Invalid|Race|Barrier|Error|Warning|Program hit|Leaked|Uninitialized|Misaligned|Out-of-range|Cuda API error'
    grep -E "^========= ($kinds)" <<< "$reports" | sed -E 's/^========= //; s/0x[0-9a-f]+/0x../g' \
      | sort | uniq -c | sort -rn | head -12 | sed 's/^/     /'
    kernels=$(grep -oE '^=========     at [^ ]+ in [A-Za-z_0-9]+' <<< "$reports" | awk '{print $NF}' \
      | sort | uniq -c | sort -rn | head -6 | awk '{printf "%s (%s) ", $2, $1}')
    echo "     kernels: $kernels"
  fi
done
echo "== sanitize: logs in $LOGS"
exit $status
