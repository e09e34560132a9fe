#!/usr/bin/env bash
# The sanitizer and fuzz stages CI runs after the main test suite:
#   1. the pure-logic unit tests under ASan+UBSan (preset `asan`);
#   2. every libFuzzer target (preset `fuzz`) on its checked-in corpus for FUZZ_SECONDS each.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"

cmake --preset asan >/dev/null
cmake --build --preset asan
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan -j2

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
shopt -s nullglob
for fuzzer in build/fuzz/tests/fuzz/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer")
  corpus="tests/fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  echo "fuzz: $name for ${FUZZ_SECONDS}s on $corpus"
  "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    "$work" "$corpus" 2>&1 | tail -n 12
  rm -rf "$work"
done
