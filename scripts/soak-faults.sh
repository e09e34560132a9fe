#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Runs fault tests over and over, one process per run, until one fails or the count is reached:
# the way to show a test is not flaky (200 clean runs in a row, idle and with a
# busy core). Not in CI: 200 runs of the default set take 15-20 minutes on a 2-core machine.
#
#   scripts/soak-faults.sh                       # 200 runs of the three cold-start tests
#   scripts/soak-faults.sh --load                # the same with one core kept busy
#   scripts/soak-faults.sh --runs 50 --filter 'AdminPort.*' --keep-going
#
# A failing run's output is kept in <out>/run-<n>.log (passing runs leave nothing). The summary
# line is "soak: <passed>/<runs> passed, <failed> failed (load: yes|no)"; exit status 1 when any
# run failed. --bin runs a copy of the binary, so a rebuild during a long soak cannot swap it.
set -euo pipefail

runs=200
load=no
keep_going=no
filter='ShardCrash.ClearsAndRebuildsFromReplay:AdminPort.MetricsHasTheDocumentedFamilies:PolicyServerOutage.RestartedEmptyIsRebuiltByResync'
build_dir=build/default
bin=
out=

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF

options:
  --runs N         runs in a row (default $runs)
  --filter F       gtest filter (default: the three cold-start tests)
  --load           keep one core busy with a spin loop for the whole soak
  --keep-going     do not stop at the first failure
  --build-dir D    where fault_tests was built (default $build_dir)
  --bin PATH       the fault_tests binary to run (default <build-dir>/tests/fault_tests)
  --out DIR        where failing runs' logs go (default <build-dir>/soak)
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    --load) load=yes; shift ;;
    --keep-going) keep_going=yes; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "soak-faults: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

bin="${bin:-$build_dir/tests/fault_tests}"
out="${out:-$build_dir/soak}"
if [ ! -x "$bin" ]; then
  echo "soak-faults: $bin is not built (cmake --build --preset default --target fault_tests)" >&2
  exit 2
fi
mkdir -p "$out"

spinner=
stop_spinner() { if [ -n "$spinner" ]; then kill "$spinner" 2>/dev/null || true; fi; }
trap stop_spinner EXIT
if [ "$load" = yes ]; then
  # One busy core: a shell spin loop, stopped (by its own pid) when the soak ends.
  ( while :; do :; done ) &
  spinner=$!
fi

passed=0
failed=0
start=$(date +%s)
for i in $(seq 1 "$runs"); do
  log="$out/run-$i.log"
  if "$bin" --gtest_filter="$filter" >"$log" 2>&1; then
    passed=$((passed + 1))
    rm -f "$log"
  else
    failed=$((failed + 1))
    echo "soak: run $i FAILED; log kept in $log"
    grep -E '^\[  FAILED  \]|Failure$' "$log" | head -n 8 | sed 's/^/soak:   /' || true
    [ "$keep_going" = yes ] || break
  fi
  if [ $((i % 20)) -eq 0 ]; then
    echo "soak: $i runs, $failed failed, $(( $(date +%s) - start )) s"
  fi
done

done_runs=$((passed + failed))
echo "soak: $passed/$done_runs passed, $failed failed (load: $load, $(( $(date +%s) - start )) s)"
[ "$failed" -eq 0 ]
