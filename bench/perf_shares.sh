#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# One bench.sh case under a system-wide perf recording, then the share of kvrelay's pipeline
# threads' samples by area (bench/perf_areas.py --comms, --process kvrelay: the load generator's
# ZMQ thread has the same name). A share is a ratio within one run: on a
# VM whose speed moves CPU a block by a fifth between identical runs, a step that takes work out
# of one area shows there run after run. Alternate two builds round by round and compare.
#
#   bench/perf_shares.sh --build-dir DIR [--case throughput] [--out DIR] [--freq 4999]
# DIR holds the kvrelay to measure (and bench/e2e's loadgen and sink, as for bench.sh --no-build).
# Prints the run's CPU a block (bench.sh's figure) and the area table; needs perf and root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR=""
CASE="throughput"
OUT=""
FREQ=4999
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD_DIR="$(realpath -m "$2")"; shift ;;
    --case) CASE="$2"; shift ;;
    --out) OUT="$(realpath -m "$2")"; shift ;;
    --freq) FREQ="$2"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "perf_shares.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$BUILD_DIR" ]] || { echo "perf_shares.sh: --build-dir is required" >&2; exit 2; }
[[ -n "$OUT" ]] || OUT="$(mktemp -d /tmp/perf-shares.XXXXXX)"
mkdir -p "$OUT"

perf record -a -F "$FREQ" -o "$OUT/perf.data" >"$OUT/perf.log" 2>&1 &
PERF=$!
sleep 1  # perf is recording before the case starts
rc=0
BENCH_NO_CALLGRIND=1 "$ROOT/scripts/bench.sh" --cases "$CASE" --no-build --build-dir "$BUILD_DIR" \
  --repeats 1 --out "$OUT/bench" >"$OUT/bench.log" 2>&1 || rc=$?
kill -INT "$PERF"
wait "$PERF" || true
[[ $rc == 0 ]] || { echo "perf_shares.sh: bench.sh failed ($OUT/bench.log)" >&2; exit 1; }

python3 - "$OUT/bench/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "cpu_ns_per_block" in d:
        print("%s: %.0f ns a block" % (d["case"], d["cpu_ns_per_block"]))
PY
python3 "$ROOT/bench/perf_areas.py" --comms "caf.multiplexer,ZMQbg/IO/0,kvr.ingress,kvr.publish" \
  --process kvrelay "$CASE" "$OUT/perf.data"
rm -f "$OUT/perf.data"
