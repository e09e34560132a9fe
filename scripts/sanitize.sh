#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# The sanitizer and fuzz stages CI runs after the main test suite:
#   1. every libFuzzer target (preset `fuzz`) on its checked-in corpus for FUZZ_SECONDS each;
#   2. the integration and fault suites (label `integration`: actors, the daemon in process and
#      as a process, real sockets) under ThreadSanitizer (preset `tsan`, tests/tsan.supp);
#   3. the pure-logic unit tests under ASan+UBSan (preset `asan`).
# SANITIZERS=fuzz,tsan,asan (the default) picks stages, e.g. SANITIZERS=tsan for one.
# With CI=true a test that did not run fails its stage (scripts/ctest-all-ran.sh), and a stage's
# build directory is removed once the stage passed (ccache keeps the
# objects): CI's disk once ran out linking the TSan build. Each stage line says what is free.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
SANITIZERS="${SANITIZERS:-fuzz,tsan,asan}"
want() { [[ ",$SANITIZERS," == *",$1,"* ]]; }
stage() { echo "== sanitize: $1 ($(date -u +%H:%M:%S), $(df -h --output=avail . | tail -n 1 | tr -d ' ') free)"; }
prune() { if [ "${CI:-}" = "true" ]; then rm -rf "build/$1"; fi; }

if want fuzz; then
  stage fuzz
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz
  shopt -s nullglob
  fuzzers=(build/fuzz/tests/fuzz/*/fuzz_*)
  [ ${#fuzzers[@]} -gt 0 ] || { echo "fuzz: no fuzzers were built" >&2; exit 1; }
  for fuzzer in "${fuzzers[@]}"; do
    [ -x "$fuzzer" ] || continue
    name=$(basename "$fuzzer")
    area=${name#fuzz_}
    corpus="tests/fuzz/corpus/$area"
    extra=()
    [ -f "tests/fuzz/$area/$area.dict" ] && extra+=("-dict=tests/fuzz/$area/$area.dict")
    work=$(mktemp -d)
    echo "fuzz: $name for ${FUZZ_SECONDS}s on $corpus"
    # New inputs go to a scratch dir: the checked-in corpus stays as reviewed. A finding makes
    # libFuzzer exit non-zero, which fails CI (set -e + pipefail).
    "$fuzzer" -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
      "${extra[@]}" "$work" "$corpus" 2>&1 | tail -n 12
    rm -rf "$work"
  done
  prune fuzz
fi

if want tsan; then
  # Every integration test, the fault suite included: the races that matter are between the
  # ZMQ, gRPC and admin threads and the actors. Debian's CAF, gRPC, ZMQ, OpenSSL and Abseil
  # are not instrumented; tests/tsan.supp says so, library by library, and nothing of ours.
  # Only what the integration label runs: the unit suites are not built under TSan.
  stage tsan
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan --target integration_tests fault_tests kvrelay_bin
  ./scripts/ctest-all-ran.sh --preset tsan -j2
  prune tsan
fi

if want asan; then
  # Last, so ctest's summary closes the CI log.
  stage asan
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  # PT6 measures RSS, which ASan's shadow memory swells: the test skips itself under a sanitizer.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    KVRELAY_SKIPS_BY_BUILD='^ProbeTable\.PT6_' ./scripts/ctest-all-ran.sh --preset asan -j2
fi
