#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# kvrelay alone in a v1 memory cgroup (root only), optionally a v1 cpu cgroup too, the
# bench loadgen and sink outside them, against a full-cache engine (LRU evictions past
# --capacity). One case per run; bench/memory/sidecar_cases.sh runs the whole list. Prints one JSON
# line: peak memory (the cgroup's max_usage and kvrelay's VmHWM), RSS idle / after, OOM kills and
# failcnt, kvrelay's exit status, CPU throttling (cpu.stat), the overloads, pause time, gaps,
# replays and declared losses kvrelay counted, the rate the loadgen achieved, and the seconds
# until the index is exact again.
#
#   bench/memory/cgroup_burst.sh [--build-dir build/default] [--blocks 1000000] [--limit-mib 128]
#       [--capacity 16384] [--no-cgroup] [--memory-budget SIZE] [--cpu-quota-us Q]
#       [--rate B --seconds S] [--outage S] [--catch-up N] [--ring N] [--engine-sndhwm N]
#       [--case NAME] [--timeout S]
#
#   --rate B --seconds S   paced at B stored blocks/s for S seconds (blocks = B * S); default: a
#                          burst, as fast as the loadgen can publish
#   --cpu-quota-us Q       also a v1 cpu cgroup: cfs_quota_us Q per cfs_period_us 100000
#   --outage S             the policy server (sink) is killed 5 s after the first publish and
#                          restarted on the same port S seconds later (a new, empty server)
#   --catch-up N           the engine publishes its first N batches before kvrelay starts; its
#                          replay ring (N batches) holds them, kvrelay gets its replay endpoint
#   --ring N               the engine serves a replay ring of N batches (no prelude)
#   --engine-sndhwm N      the engine's PUB drops past N queued messages (default 0: never drops)
#
# "exact": the engine finished publishing, kvrelay's resident blocks (all partitions) equal the
# engine's resident blocks, nothing is pending for the server or queued, the index is not
# incomplete, every batch the engine generated was decoded or declared lost (a full cache holds
# as many blocks after any batch: the count alone is met long before), and (with --outage)
# kvrelay resynced the restarted server. With a ring, the engine serves it until then. The
# seconds count from the first publish (burst), from kvrelay's start (catch-up: the live stream
# resumes at once) or from the last publish (paced, outage). A burst's or a catch-up's cannot be
# fewer than the engine took to publish what follows (live_publish_s): with --catch-up that
# stream lasts (blocks - the prelude's blocks) / rate, so a --blocks just above the prelude's
# (its "prelude" line) times the catch-up itself, not the engine's stream, and
# "cpu_s_until_exact" (kvrelay's CPU seconds from its start until exact) says whether the
# catch-up was CPU-bound (about seconds x the quota) or waited; with --outage,
# "resync_s" counts from the server's restart until kvrelay resynced it and nothing is pending.
# Needs the targets kvrelay, kvrelay-bench-loadgen and kvrelay-bench-sink. Never asserts a timing;
# exits 1 when kvrelay died or the index did not become exact within --timeout.
set -euo pipefail

# shellcheck source=bench/memory/lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=build/default BLOCKS=1000000 LIMIT_MIB=128 CAPACITY=16384 CGROUP=1 KV_EXTRA=()
RATE=0 SECONDS_=0 CPU_QUOTA="" OUTAGE=0 CATCH_UP=0 RING=0 SNDHWM=0 CASE="" TIMEOUT=300
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    --blocks) BLOCKS="$2"; shift ;;
    --limit-mib) LIMIT_MIB="$2"; shift ;;
    --capacity) CAPACITY="$2"; shift ;;
    --no-cgroup) CGROUP=0 ;;
    --memory-budget) KV_EXTRA+=(--memory-budget "$2"); shift ;;
    --cpu-quota-us) CPU_QUOTA="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --seconds) SECONDS_="$2"; shift ;;
    --outage) OUTAGE="$2"; shift ;;
    --catch-up) CATCH_UP="$2"; RING="$2"; shift ;;
    --ring) RING="$2"; shift ;;
    --engine-sndhwm) SNDHWM="$2"; shift ;;
    --case) CASE="$2"; shift ;;
    --timeout) TIMEOUT="$2"; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
for v in "$TIMEOUT" "$SECONDS_" "$OUTAGE"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "--timeout, --seconds and --outage are whole seconds: $v" >&2; exit 2; }
done
[[ "$RATE" == 0 || "$SECONDS_" == 0 ]] || BLOCKS=$((RATE * SECONDS_))
[[ $CGROUP == 1 ]] || CPU_QUOTA=""
[[ -n "$CASE" ]] || CASE="burst-${BLOCKS}"
CASE+=$([[ $CGROUP == 1 ]] && echo "-cgroup-${LIMIT_MIB}MiB${CPU_QUOTA:+-cpu${CPU_QUOTA}}" || echo "-nolimit")
KV="$BUILD/kvrelay"
LG="$BUILD/bench/e2e/kvrelay-bench-loadgen"
SINK="$BUILD/bench/e2e/kvrelay-bench-sink"
ADAPTERS="1=lora-0,2=lora-1,3=lora-2,4=lora-3,5=lora-4,6=lora-5,7=lora-6,8=lora-7"
WORK="$(mktemp -d)"
CG="" CPU_CG="" SINK_PID=""
PIDS=()
cleanup() {
  for p in "${PIDS[@]}" $SINK_PID; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}" $SINK_PID; do wait "$p" 2>/dev/null || true; done
  remove_cgroups
}
trap cleanup EXIT

loadgen_line() {  # $1 kind, $2 field: the field of the loadgen's JSON line of that kind, or ""
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d["kind"]==sys.argv[2]: print(d[sys.argv[3]])' "$WORK/loadgen.out" "$1" "$2" 2>/dev/null || true
}

start_sink 127.0.0.1:0
SINK_PORT="$(cat "$WORK/sink.port")"
PUB_PORT="$(free_port)"
REPLAY_PORT="$(free_port)"
ADMIN="127.0.0.1:$(free_port)"

LG_EXTRA=(--sndhwm "$SNDHWM" --prelude-batches "$CATCH_UP") KV_REPLAY=()
if [[ "$RING" -gt 0 ]]; then
  # The engine stays up (its ring served) until the loop below ends: kvrelay may still be reading it.
  LG_EXTRA+=(--replay-bind "tcp://127.0.0.1:$REPLAY_PORT" --buffer-steps "$RING" --hold-file "$WORK/hold")
  KV_REPLAY=(--replay-endpoint "tcp://127.0.0.1:$REPLAY_PORT")
fi
"$LG" --bind "tcp://127.0.0.1:$PUB_PORT" --blocks "$BLOCKS" --rate "$RATE" --capacity "$CAPACITY" \
  --clear-prob 0 --floor-repeats 0 --go-file "$WORK/go" "${LG_EXTRA[@]}" \
  >"$WORK/loadgen.out" 2>"$WORK/loadgen.log" &
PIDS+=($!)

[[ $CGROUP == 0 ]] || make_cgroups kvrelay-bench "$LIMIT_MIB" "$CPU_QUOTA"
start_kvrelay() {
  (
    join_cgroups
    exec "$KV" --server "127.0.0.1:$SINK_PORT" --admin-listen "$ADMIN" --log-level warn \
      --engine-endpoint "tcp://127.0.0.1:$PUB_PORT" --replica-id bench --model-id bench \
      --engine-metrics-url "" --lora-adapter-names "$ADAPTERS" "${KV_REPLAY[@]}" "${KV_EXTRA[@]}"
  ) >"$WORK/kvrelay.log" 2>&1 &
  KV_PID=$!
  PIDS+=("$KV_PID")
}

# The last scrape that answered stays in $WORK/metrics (kvrelay's counters survive its death).
scrape() {
  curl -s --max-time 2 "http://$ADMIN/metrics" >"$WORK/metrics.new" 2>/dev/null &&
    mv "$WORK/metrics.new" "$WORK/metrics" || true
}
msum() {  # $1 family, $2 optional substring of the series; from the last scrape
  awk -v n="$1" -v f="${2:-}" '
    index($0, n) == 1 && (substr($0, length(n) + 1, 1) == "{" || substr($0, length(n) + 1, 1) == " ") &&
    (f == "" || index($0, f) > 0) { s += $NF } END { printf(fmt, s + 0) }' fmt="${FMT:-%.0f}" \
    "$WORK/metrics" 2>/dev/null
}
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
wait_connected() {
  for _ in $(seq 1200); do
    scrape
    [[ "$(msum kvrelay_engine_connected)" == "1" ]] && return
    sleep 0.05
  done
}

for _ in $(seq 3000); do
  grep -q '"kind":"generated"' "$WORK/loadgen.out" 2>/dev/null && break
  sleep 0.1
done
GENERATED="$(loadgen_line generated blocks)"
GEN_BATCHES="$(loadgen_line generated batches)"
ENGINE_RESIDENT="$(loadgen_line generated engine_resident_blocks)"
if [[ "$CATCH_UP" -gt 0 ]]; then  # the engine ran before kvrelay: its ring holds the prelude
  for _ in $(seq 3000); do
    grep -q '"kind":"prelude"' "$WORK/loadgen.out" 2>/dev/null && break
    sleep 0.1
  done
  start_kvrelay
  T0="$(now)"
  wait_connected
  touch "$WORK/go"  # the live stream resumes at once: kvrelay catches up meanwhile
  RSS_IDLE=0
else
  start_kvrelay
  wait_connected
  sleep 1
  RSS_IDLE="$(status_kb "$KV_PID" VmRSS)"
  T0="$(now)"
  touch "$WORK/go"
fi
scrape
BUDGET="$(grep '^kvrelay_memory_budget_bytes' "$WORK/metrics" || true)"

PEAK_RSS=0 EXACT_S="" EXACT_CPU_S="" RESYNC_S="" ALIVE=1 T_FROM="$T0" OUTAGE_STATE=none RESYNCS0=0
period=0.1
[[ "$RATE" == 0 ]] || period=0.5  # fewer scrapes while paced: each costs kvrelay CPU
# In bash's own clock (µs): a python3 a look, twice a second, was CPU taken from the two cores
# the engine, kvrelay and the sink share.
deadline_us=$(( ${EPOCHREALTIME/./} + (TIMEOUT + SECONDS_ + OUTAGE) * 1000000 ))
while (( ${EPOCHREALTIME/./} < deadline_us )); do
  if ! kill -0 "$KV_PID" 2>/dev/null; then ALIVE=0; break; fi
  r="$(status_kb "$KV_PID" VmRSS)"; [[ "$r" -gt "$PEAK_RSS" ]] && PEAK_RSS="$r"
  scrape
  if [[ "$OUTAGE" -gt 0 ]]; then
    if [[ $OUTAGE_STATE == none ]] && python3 -c "import sys; sys.exit(0 if $(now) - $T0 >= 5 else 1)"; then
      kill "$SINK_PID"; wait "$SINK_PID" 2>/dev/null || true
      OUTAGE_STATE=down T_DOWN="$(now)"
    elif [[ $OUTAGE_STATE == down ]] &&
         python3 -c "import sys; sys.exit(0 if $(now) - $T_DOWN >= $OUTAGE else 1)"; then
      RESYNCS0="$(msum kvrelay_resyncs_total)"
      start_sink "127.0.0.1:$SINK_PORT"
      OUTAGE_STATE=up T_UP="$(now)"
    elif [[ $OUTAGE_STATE == up && -z "$RESYNC_S" && "$(msum kvrelay_resyncs_total)" -gt "$RESYNCS0" &&
            "$(msum kvrelay_pending_entries)" == 0 ]]; then
      RESYNC_S="$(since "$T_UP")"
    fi
  fi
  if grep -q '"kind":"published"' "$WORK/loadgen.out" 2>/dev/null; then
    [[ "$RATE" == 0 || "$CATCH_UP" -gt 0 || "$T_FROM" != "$T0" ]] ||
      T_FROM="$(loadgen_line published end_unix)"
    if [[ "$OUTAGE" == 0 || -n "$RESYNC_S" ]] &&
       [[ "$(msum kvrelay_resident_blocks)" == "$ENGINE_RESIDENT" && "$(msum kvrelay_pending_entries)" == 0 &&
          "$(msum kvrelay_queue_bytes)" == 0 && "$(msum kvrelay_index_incomplete)" == 0 &&
          $(( $(msum kvrelay_batches_total) + $(msum kvrelay_batches_lost_total) )) -ge "$GEN_BATCHES" ]]; then
      EXACT_S="$(since "$T_FROM")"
      EXACT_CPU_S="$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$KV_PID/stat")"
      break
    fi
  fi
  sleep "$period"
done
touch "$WORK/hold"
EXIT_STATUS=""
if [[ $ALIVE == 1 ]]; then
  sleep 3  # the trim after the overload, and the last flushes
  scrape
  curl -s --max-time 2 "http://$ADMIN/debug/tree" >"$WORK/debug_tree.json" || true
  cp "/proc/$KV_PID/smaps_rollup" "$WORK/smaps_rollup" 2>/dev/null || true
else
  wait "$KV_PID" 2>/dev/null && EXIT_STATUS=0 || EXIT_STATUS=$?
fi
RSS_AFTER="$(status_kb "$KV_PID" VmRSS)"
HWM="$(status_kb "$KV_PID" VmHWM)"
CG_PEAK="" OOM_KILLS="" FAILCNT="" NR_PERIODS="" NR_THROTTLED="" THROTTLED_NS=""
if [[ -n "$CG" ]]; then
  CG_PEAK="$(cat "$CG/memory.max_usage_in_bytes")"
  OOM_KILLS="$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control")"
  FAILCNT="$(cat "$CG/memory.failcnt")"
fi
if [[ -n "$CPU_CG" ]]; then
  NR_PERIODS="$(awk '$1 == "nr_periods" { print $2 }' "$CPU_CG/cpu.stat")"
  NR_THROTTLED="$(awk '$1 == "nr_throttled" { print $2 }' "$CPU_CG/cpu.stat")"
  THROTTLED_NS="$(awk '$1 == "throttled_time" { print $2 }' "$CPU_CG/cpu.stat")"
fi
m() { msum "$@"; }
python3 - <<PY
import json
print(json.dumps({
  "case": "${CASE}", "blocks": ${GENERATED}, "capacity": ${CAPACITY},
  "engine_resident": ${ENGINE_RESIDENT}, "kvrelay_resident": int("$(m kvrelay_resident_blocks)"),
  "rate_target": ${RATE}, "rate_achieved": float("$(loadgen_line published blocks_per_s)" or 0),
  "live_publish_s": float("$(loadgen_line published seconds)" or 0),
  "prelude_blocks": int("$(loadgen_line prelude blocks)" or 0),
  "catch_up_batches": ${CATCH_UP}, "ring": ${RING}, "engine_sndhwm": ${SNDHWM},
  "outage_s": ${OUTAGE},
  "alive": bool(${ALIVE}), "exit_status": int("${EXIT_STATUS}") if "${EXIT_STATUS}" else None,
  "budget": """${BUDGET}""".strip(),
  "rss_idle_mib": round(${RSS_IDLE} / 1024, 1), "rss_peak_sampled_mib": round(${PEAK_RSS} / 1024, 1),
  "vm_hwm_mib": round(${HWM:-0} / 1024, 1), "rss_after_mib": round(${RSS_AFTER:-0} / 1024, 1),
  "cgroup_max_usage_mib": round(int("${CG_PEAK}" or 0) / 1048576, 1) if "${CG_PEAK}" else None,
  "oom_kills": int("${OOM_KILLS}") if "${OOM_KILLS}" else None,
  "failcnt": int("${FAILCNT}") if "${FAILCNT}" else None,
  "cpu_periods": int("${NR_PERIODS}") if "${NR_PERIODS}" else None,
  "cpu_throttled": int("${NR_THROTTLED}") if "${NR_THROTTLED}" else None,
  "cpu_throttled_s": round(int("${THROTTLED_NS}") / 1e9, 1) if "${THROTTLED_NS}" else None,
  "seconds_until_exact": float("${EXACT_S}") if "${EXACT_S}" else None,
  "cpu_s_until_exact": float("${EXACT_CPU_S}") if "${EXACT_CPU_S}" else None,
  "resync_s": float("${RESYNC_S}") if "${RESYNC_S}" else None,
  "stored_decoded": int("$(m kvrelay_blocks_total 'type="stored"')"),
  "overloads": int("$(m kvrelay_overloads_total)"),
  "paused_s": float("$(FMT=%.2f m kvrelay_ingress_paused_seconds_total)"),
  "gaps": int("$(m kvrelay_seq_gaps_total)"),
  "batches_lost": int("$(m kvrelay_batches_lost_total)"),
  "history_lost": int("$(m kvrelay_history_lost_total)"),
  "history_skipped": int("$(m kvrelay_history_skipped_batches_total)"),
  "recovered": int("$(m kvrelay_batches_recovered_total)"),
  "replay_shed": int("$(m kvrelay_replay_shed_batches_total)"),
  "engine_batches": ${GEN_BATCHES}, "batches_decoded": int("$(m kvrelay_batches_total)"),
  "replays": int("$(m kvrelay_replays_total 'outcome="requested"')"),
  "pending_sheds": int("$(m kvrelay_pending_sheds_total)"),
  "resyncs": int("$(m kvrelay_resyncs_total)"),
  "index_incomplete": int("$(m kvrelay_index_incomplete)"),
  "work": "${WORK}",
}))
PY
[[ $ALIVE == 1 && -n "$EXACT_S" ]]
