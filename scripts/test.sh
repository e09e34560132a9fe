#!/usr/bin/env bash
# Installs dependencies, builds kvrelay (RelWithDebInfo) and runs every test with ctest.
# With CI=true it also runs the benchmark harness's smoke mode and scripts/sanitize.sh: the fuzzers
# (60 s each), the integration and fault suites under ThreadSanitizer, and the pure-logic unit
# tests under ASan+UBSan.
#   ./scripts/test.sh                 # everything in the default preset
#   ./scripts/test.sh -R Decoder      # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

cmake --preset default >/dev/null
cmake --build --preset default
rc=0
ctest --preset default -j2 "$@" || rc=$?
# A test that skips says why on a "SKIP: " line (no Chromium, no promtool, ...); ctest keeps
# skipped tests' output to itself, so the reasons are repeated here for the CI log.
if grep -q '^SKIP: ' build/default/Testing/Temporary/LastTest.log 2>/dev/null; then
  echo "skipped, and why:"
  grep '^SKIP: ' build/default/Testing/Temporary/LastTest.log | sort | uniq -c
fi
[ "$rc" = 0 ] || exit "$rc"

if [ "${CI:-}" = "true" ]; then
  # The end-to-end benchmark harness, once on small inputs: it must run, no thresholds.
  smoke_log=build/default/bench-smoke.log
  if ./scripts/bench.sh --smoke --no-build --build-dir build/default >"$smoke_log" 2>&1; then
    echo "bench smoke: ok ($smoke_log)"
  else
    tail -n 40 "$smoke_log"
    echo "bench smoke: FAILED" >&2
    exit 1
  fi
  ./scripts/sanitize.sh
fi
