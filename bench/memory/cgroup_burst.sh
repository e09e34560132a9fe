#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Issue 27: kvrelay alone in a v1 memory cgroup (root only), the bench loadgen and sink outside it,
# against a burst of stored blocks published as fast as possible by a full-cache engine (LRU
# evictions past --capacity). Prints one JSON line: peak memory (the cgroup's max_usage and
# kvrelay's VmHWM), RSS idle / after, OOM kills, the overloads and pause time kvrelay counted,
# sequence gaps, and the seconds from the first publish until kvrelay decoded every block and its
# queues and pending set were empty. --no-cgroup runs the same without a limit, for comparison.
#
#   bench/memory/cgroup_burst.sh [--build-dir build/default] [--blocks 1000000] [--limit-mib 128]
#                                [--capacity 16384] [--no-cgroup] [--memory-budget SIZE]
#
# Needs the targets kvrelay, kvrelay-bench-loadgen and kvrelay-bench-sink. Never asserts a timing;
# exits 1 when kvrelay died or missed blocks.
set -euo pipefail

BUILD=build/default BLOCKS=1000000 LIMIT_MIB=128 CAPACITY=16384 CGROUP=1 KV_EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    --blocks) BLOCKS="$2"; shift ;;
    --limit-mib) LIMIT_MIB="$2"; shift ;;
    --capacity) CAPACITY="$2"; shift ;;
    --no-cgroup) CGROUP=0 ;;
    --memory-budget) KV_EXTRA+=(--memory-budget "$2"); shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
KV="$BUILD/kvrelay"
LG="$BUILD/bench/e2e/kvrelay-bench-loadgen"
SINK="$BUILD/bench/e2e/kvrelay-bench-sink"
WORK="$(mktemp -d)"
CG=""
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -z "$CG" ]] || rmdir "$CG" 2>/dev/null || true
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
now() { date +%s.%N; }

"$SINK" --listen 127.0.0.1:0 --port-file "$WORK/sink.port" --stats-file "$WORK/sink.json" \
  2>"$WORK/sink.log" &
PIDS+=($!)
for _ in $(seq 200); do [[ -s "$WORK/sink.port" ]] && break; sleep 0.02; done
SINK_PORT="$(cat "$WORK/sink.port")"
PUB_PORT="$(free_port)"
ADMIN="127.0.0.1:$(free_port)"

"$LG" --bind "tcp://127.0.0.1:$PUB_PORT" --blocks "$BLOCKS" --rate 0 --capacity "$CAPACITY" \
  --clear-prob 0 --floor-repeats 0 --go-file "$WORK/go" >"$WORK/loadgen.out" 2>"$WORK/loadgen.log" &
PIDS+=($!)

if [[ $CGROUP == 1 ]]; then
  CG="/sys/fs/cgroup/memory/kvrelay-bench-$$"
  mkdir "$CG"
  echo $((LIMIT_MIB << 20)) >"$CG/memory.limit_in_bytes"
  echo 0 >"$CG/memory.swappiness" 2>/dev/null || true
fi
(
  [[ -z "$CG" ]] || echo "$BASHPID" >"$CG/cgroup.procs"
  exec "$KV" --server "127.0.0.1:$SINK_PORT" --admin-listen "$ADMIN" --log-level warn \
    --engine-endpoint "tcp://127.0.0.1:$PUB_PORT" --replica-id bench --model-id bench \
    --engine-metrics-url "" "${KV_EXTRA[@]}"
) >"$WORK/kvrelay.log" 2>&1 &
KV_PID=$!
PIDS+=("$KV_PID")

metrics() { curl -s --max-time 2 "http://$ADMIN/metrics" || true; }
msum() {  # $1 family, $2 optional substring of the series
  metrics | awk -v n="$1" -v f="${2:-}" '
    index($0, n) == 1 && (substr($0, length(n) + 1, 1) == "{" || substr($0, length(n) + 1, 1) == " ") &&
    (f == "" || index($0, f) > 0) { s += $NF } END { printf "%.3f", s + 0 }'
}
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

for _ in $(seq 1200); do
  [[ "$(msum kvrelay_engine_connected)" == "1.000" ]] && break
  sleep 0.05
done
for _ in $(seq 3000); do
  grep -q '"kind":"generated"' "$WORK/loadgen.out" 2>/dev/null && break
  sleep 0.1
done
GENERATED="$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d["kind"]=="generated": print(d["blocks"])' "$WORK/loadgen.out")"
sleep 1
RSS_IDLE="$(status_kb "$KV_PID" VmRSS)"
BUDGET="$(metrics | grep '^kvrelay_memory_budget_bytes' || true)"

T0="$(now)"
touch "$WORK/go"
PEAK_RSS=0 EXACT_S="" ALIVE=1
for _ in $(seq 6000); do
  if ! kill -0 "$KV_PID" 2>/dev/null; then ALIVE=0; break; fi
  r="$(status_kb "$KV_PID" VmRSS)"; [[ "$r" -gt "$PEAK_RSS" ]] && PEAK_RSS="$r"
  stored="$(msum kvrelay_blocks_total 'type="stored"')"
  if [[ "${stored%.*}" -ge "$GENERATED" && "$(msum kvrelay_pending_entries)" == "0.000" &&
        "$(msum kvrelay_queue_bytes)" == "0.000" ]]; then
    EXACT_S="$(python3 -c "print(round($(now) - $T0, 2))")"
    break
  fi
  sleep 0.1
done
sleep 3  # the trim after the overload, and the last flushes
RSS_AFTER="$(status_kb "$KV_PID" VmRSS)"
HWM="$(status_kb "$KV_PID" VmHWM)"
CG_PEAK="" OOM_KILLS="" FAILCNT=""
if [[ -n "$CG" ]]; then
  CG_PEAK="$(cat "$CG/memory.max_usage_in_bytes")"
  OOM_KILLS="$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control")"
  FAILCNT="$(cat "$CG/memory.failcnt")"
fi
python3 - <<PY
import json
print(json.dumps({
  "case": "burst-${BLOCKS}" + ("-cgroup-${LIMIT_MIB}MiB" if ${CGROUP} else "-nolimit"),
  "blocks": ${GENERATED}, "capacity": ${CAPACITY}, "alive": bool(${ALIVE}),
  "budget": """${BUDGET}""".strip(),
  "rss_idle_mib": round(${RSS_IDLE} / 1024, 1), "rss_peak_sampled_mib": round(${PEAK_RSS} / 1024, 1),
  "vm_hwm_mib": round(${HWM:-0} / 1024, 1), "rss_after_mib": round(${RSS_AFTER:-0} / 1024, 1),
  "cgroup_max_usage_mib": round(int("${CG_PEAK}" or 0) / 1048576, 1) if "${CG_PEAK}" else None,
  "oom_kills": int("${OOM_KILLS}") if "${OOM_KILLS}" else None,
  "failcnt": int("${FAILCNT}") if "${FAILCNT}" else None,
  "seconds_until_exact": float("${EXACT_S}") if "${EXACT_S}" else None,
  "overloads": float("$(msum kvrelay_overloads_total)"),
  "paused_s": float("$(msum kvrelay_ingress_paused_seconds_total)"),
  "gaps": float("$(msum kvrelay_seq_gaps_total)"),
}))
PY
[[ $ALIVE == 1 && -n "$EXACT_S" ]]
