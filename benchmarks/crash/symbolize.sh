#!/usr/bin/env bash
# Prints a native crash log's stack with the C++ core's frames resolved to functions and
# lines: symbolize.sh LOG CORE_LIBRARY (the _C*.so built with debug information).
log=$1; lib=$2
grep -q "native crash" "$log" 2>/dev/null || exit 0
awk '/^test: /{t=$0} /native crash/{print t; p=1} p' "$log" | head -80
offsets=$(awk '/native crash/{p=1} p' "$log" | grep "$(basename "$lib")" | sed -n 's/.*(+\(0x[0-9a-f]*\)).*/\1/p' | head -60)
[ -n "$offsets" ] && addr2line -f -C -i -e "$lib" $offsets | paste - - | head -120
